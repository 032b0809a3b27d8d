package dynamo_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue/idemtest"
)

// prefixed gives each contract case its own keys on one shared table.
type prefixed struct {
	hostqueue.IdempotencyStore
	prefix string
}

func (p prefixed) Claim(ctx context.Context, c hostqueue.IdempotencyClaim) (hostqueue.IdempotencyRecord, error) {
	c.Key = p.prefix + c.Key
	return p.IdempotencyStore.Claim(ctx, c)
}

func (p prefixed) Settle(ctx context.Context, key, token string, out hostqueue.IdempotencyRecord) error {
	return p.IdempotencyStore.Settle(ctx, p.prefix+key, token, out)
}

// TestIdempotencyContract runs the idempotency contract on moto, each
// case on its own keys of one table, through two stores (two Lambda
// instances) in turn.
func TestIdempotencyContract(t *testing.T) {
	st, cfg := stack.DeployForTest(t, stack.Options{})
	cfg.APIOptions = append(cfg.APIOptions, moto.WithClock(fixedNow)) // see newEnv
	db := dynamodb.NewFromConfig(cfg)
	idemtest.Run(t, func(t *testing.T) hostqueue.IdempotencyStore {
		return prefixed{dynamo.New(db, st.TableName, fixedNow), t.Name() + "/"}
	}, true)
}

// lostAnswer applies every PutItem and then answers with an error, as a
// connection reset after DynamoDB took the write does.
type lostAnswer struct {
	dynamo.Client
	lost int
}

func (c *lostAnswer) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := c.Client.PutItem(ctx, in, opt...)
	if err != nil {
		return out, err
	}
	c.lost++
	return nil, errors.New("connection reset by peer")
}

// TestIdempotencyClaimWhoseAnswerWasLost: a claim that landed while its
// caller saw an error is found by its token and held, not refused as
// another request in flight.
func TestIdempotencyClaimWhoseAnswerWasLost(t *testing.T) {
	e := newEnv(t)
	c := &lostAnswer{Client: e.db}
	s := dynamo.New(c, e.table, fixedNow)
	claim := hostqueue.IdempotencyClaim{Key: "lost", BodyHash: "b", Token: "tok", Now: t0, LockUntil: t0.Add(60e9), Expires: t0.Add(3600e9)}
	rec, err := s.Claim(t.Context(), claim)
	if err != nil || rec.State != hostqueue.IdempotencyInFlight || rec.Token != "tok" || c.lost != 1 {
		t.Fatalf("Claim = %+v, %v (lost answers %d); want held under tok", rec, err, c.lost)
	}
	claim.Token = "other"
	if _, err := e.store.Claim(t.Context(), claim); !errors.Is(err, hostqueue.ErrIdempotencyInFlight) {
		t.Errorf("second request: %v, want ErrIdempotencyInFlight", err)
	}
}
