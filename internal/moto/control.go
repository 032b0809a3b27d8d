package moto

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// The strict layer's knobs (strict.go), set server-wide with SetStrict, per
// table with SetStrictTable, per queue with SetStrictQueue, or at start by
// the environment variable MOTO_STRICT_<KNOB in upper case> (MOTO_STRICT=off
// turns every rule off). A limit of 0 turns its rule off.
const (
	// KnobSQSValidChars refuses a message holding a character outside
	// SQS's set with InvalidMessageContents.
	KnobSQSValidChars = "sqs_valid_chars"
	// KnobSQSByteSize measures a message in UTF-8 bytes, body and
	// attributes, against the queue's MaximumMessageSize (moto counts the
	// body's characters), and a batch's total against 1 MiB.
	KnobSQSByteSize = "sqs_byte_size"
	// KnobSQSRedeliverShare is the share of deleted messages of a standard
	// queue that come back once more (at-least-once delivery).
	KnobSQSRedeliverShare = "sqs_redeliver_share"
	// KnobDynamoPartitionWCU and KnobDynamoPartitionRCU are the units one
	// partition key takes in a sliding second.
	KnobDynamoPartitionWCU = "dynamodb_partition_wcu"
	KnobDynamoPartitionRCU = "dynamodb_partition_rcu"
	// KnobDynamoOnDemandWCU and KnobDynamoOnDemandRCU are an on-demand
	// table's warm throughput, in units a sliding second.
	KnobDynamoOnDemandWCU = "dynamodb_ondemand_wcu"
	KnobDynamoOnDemandRCU = "dynamodb_ondemand_rcu"
	// KnobDynamoStaleReadMs is how far back an eventually consistent read
	// may see an item (a uniform lag in [0, this) per read).
	KnobDynamoStaleReadMs = "dynamodb_stale_read_ms"
	// KnobDynamoTTL turns the TTL reaper on.
	KnobDynamoTTL = "dynamodb_ttl"
	// KnobDynamoTTLMaxDelayS is the longest an expired item lives on: each
	// is deleted at a uniformly random point in [expiry, expiry + this).
	KnobDynamoTTLMaxDelayS = "dynamodb_ttl_max_delay_s"
	// KnobSSMTPS is the account's Parameter Store bucket (GetParameter,
	// GetParameters, GetParametersByPath together), a second's worth deep.
	KnobSSMTPS = "ssm_tps"
	// KnobSSMHigherThroughput switches to the paid higher throughput:
	// KnobSSMHigherTPS for GetParameter(s), KnobSSMByPathHigherTPS for
	// GetParametersByPath.
	KnobSSMHigherThroughput = "ssm_higher_throughput"
	KnobSSMHigherTPS        = "ssm_higher_tps"
	KnobSSMByPathHigherTPS  = "ssm_by_path_higher_tps"
)

// DefaultStrict is the strict layer's defaults: AWS's documented values
// (the pages are cited in strict.go and NOTES.md), except the redelivery
// share, for which AWS gives no figure ("on rare occasions").
var DefaultStrict = map[string]any{
	KnobSQSValidChars:       true,
	KnobSQSByteSize:         true,
	KnobSQSRedeliverShare:   0.005,
	KnobDynamoPartitionWCU:  1000,
	KnobDynamoPartitionRCU:  3000,
	KnobDynamoOnDemandWCU:   4000,
	KnobDynamoOnDemandRCU:   12000,
	KnobDynamoStaleReadMs:   1000,
	KnobDynamoTTL:           true,
	KnobDynamoTTLMaxDelayS:  172800,
	KnobSSMTPS:              40,
	KnobSSMHigherThroughput: false,
	KnobSSMHigherTPS:        10000,
	KnobSSMByPathHigherTPS:  100,
}

// Clock scopes for SetClock: a table's meters and TTL, the account's SSM
// bucket, or every scope without a clock of its own.
const (
	ScopeSSM = "ssm"
	ScopeAll = "*"
)

// TableScope is the clock scope of a table's throughput windows, stale
// reads and (for requests without WithClock) TTL reaper.
func TableScope(table string) string { return "table:" + table }

// HeaderNow carries a client's clock (Unix milliseconds) to the strict
// layer's TTL reaper; see WithClock.
const HeaderNow = "X-Strict-Now"

// WithClock returns an SDK API option that sends now() with every request,
// so the strict layer's TTL reaper judges that request's tables on the
// caller's clock (a store under a fake clock sees items expire when its
// clock passes their TTL). Throughput meters stay on the server's clock.
func WithClock(now func() time.Time) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Build.Add(middleware.BuildMiddlewareFunc("StrictClock",
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				if req, ok := in.Request.(*smithyhttp.Request); ok {
					req.Header.Set(HeaderNow, strconv.FormatInt(now().UnixMilli(), 10))
				}
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	}
}

// StrictStatus is what the strict layer reports: its defaults, the
// configuration in force, the clocks set and its counters (throttles per
// table, the highest units a second a partition key reached, SSM
// throttles per operation, refused and redelivered messages per queue, TTL
// deletions per table).
type StrictStatus struct {
	Defaults map[string]any                `json:"defaults"`
	Config   map[string]any                `json:"config"`
	Clocks   map[string]float64            `json:"clocks"`
	Counters map[string]map[string]float64 `json:"counters"`
}

// Strict reads the strict layer's status from the server at endpoint.
func Strict(ctx context.Context, endpoint string) (StrictStatus, error) {
	var st StrictStatus
	err := strictCall(ctx, endpoint, http.MethodGet, "/moto-api/strict", nil, &st)
	return st, err
}

// SetStrict sets knobs server-wide. It affects every client of the server:
// tests on a shared server set knobs per table or queue instead.
func SetStrict(ctx context.Context, endpoint string, knobs map[string]any) error {
	return strictCall(ctx, endpoint, http.MethodPost, "/moto-api/strict/config", knobs, nil)
}

// ResetStrict restores the knobs of the server's start (defaults and
// environment) and drops every per-table and per-queue override.
func ResetStrict(ctx context.Context, endpoint string) error {
	return SetStrict(ctx, endpoint, map[string]any{"reset": true})
}

// SetStrictTable sets knobs for one table; nil or empty knobs drop its
// overrides.
func SetStrictTable(ctx context.Context, endpoint, table string, knobs map[string]any) error {
	return SetStrict(ctx, endpoint, map[string]any{"tables": map[string]any{table: orEmpty(knobs)}})
}

// SetStrictQueue sets knobs for one queue (by name); nil or empty knobs
// drop its overrides.
func SetStrictQueue(ctx context.Context, endpoint, queue string, knobs map[string]any) error {
	return SetStrict(ctx, endpoint, map[string]any{"queues": map[string]any{queue: orEmpty(knobs)}})
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// SetClock stops a scope's clock at t: its meters then see no time pass
// until the clock is moved (AdvanceClock) or released (ReleaseClock), so a
// test of a rate limit does not depend on the machine's speed.
func SetClock(ctx context.Context, endpoint, scope string, t time.Time) error {
	return strictCall(ctx, endpoint, http.MethodPost, "/moto-api/strict/clock",
		map[string]any{"scope": scope, "now": float64(t.UnixNano()) / 1e9}, nil)
}

// AdvanceClock moves a scope's clock by d (from the server's time if the
// scope had no clock of its own, which it then keeps).
func AdvanceClock(ctx context.Context, endpoint, scope string, d time.Duration) error {
	return strictCall(ctx, endpoint, http.MethodPost, "/moto-api/strict/clock",
		map[string]any{"scope": scope, "advance": d.Seconds()}, nil)
}

// ReleaseClock puts a scope back on the server's clock.
func ReleaseClock(ctx context.Context, endpoint, scope string) error {
	return strictCall(ctx, endpoint, http.MethodPost, "/moto-api/strict/clock",
		map[string]any{"scope": scope, "now": nil}, nil)
}

func strictCall(ctx context.Context, endpoint, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("strict layer %s: %w", path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint+path, body)
	if err != nil {
		return fmt.Errorf("strict layer %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("strict layer %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("strict layer %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("strict layer %s: %s: %s (a moto started without the strict layer, e.g. Options{Stock: true}, has no control API)", path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("strict layer %s: %w", path, err)
		}
	}
	return nil
}
