// Package config reads the functions' deployment settings from the
// environment that template.yaml gives them. These are fixed per deployment;
// the live-tunable knobs are in package params (SSM Parameter Store).
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// Config is the environment of a function.
type Config struct {
	TableName      string
	OutputQueueURL string
	InputQueueURL  string
	// WakeQueueURL is the check function's wake-up queue (ingest only;
	// empty: no wake-ups, the schedule alone runs the shards).
	WakeQueueURL string
	ParamPath    string
	ShardCount   int
	// Addresses is the fetcher's (and ingest's) address policy:
	// ALLOW_PRIVATE_NETWORKS=true opens the private set (loopback, RFC
	// 1918, CGNAT, unique local; never link-local or a metadata address),
	// ALLOW_NETWORKS opens the networks it lists (CIDRs, comma-separated;
	// the metadata addresses only when named exactly), and its denials
	// name these two variables. They are environment settings, not SSM
	// parameters, so that nobody can open the VPC or the metadata endpoint
	// to submitted URLs by editing a parameter: the template pins both
	// closed.
	Addresses fetch.AddressPolicy
	LogLevel  string
	// CheckRun is how long a check invocation keeps starting requests.
	CheckRun time.Duration
	// BodyBucket keeps bodies larger than InlineBodyBytes (check only;
	// empty: none, every body is inline and cut to fit the message).
	BodyBucket string
	// BodyRetention is how long BodyBucket keeps a body (its lifecycle
	// rule); zero when not given.
	BodyRetention time.Duration
	// WarcOutput keeps every exchange as WARC records in segments of
	// BodyBucket (check only; WARC_OUTPUT=true, the template's WarcOutput).
	WarcOutput bool
	// OutputMaxMessageBytes is the output queue's MaximumMessageSize: the
	// largest result message (default 256 KiB).
	OutputMaxMessageBytes int
	// EphemeralStorageMB is the function's /tmp in MB, its
	// EphemeralStorage (EPHEMERAL_STORAGE_MB; Lambda's default 512 when
	// absent): where WarcOutput spools records (see
	// params.Cache.LimitSpool).
	EphemeralStorageMB int
}

// DefaultEphemeralStorageMB is a function's /tmp unless its
// EphemeralStorage says more (up to 10,240 MB; "Lambda quotas").
const DefaultEphemeralStorageMB = 512

// Remedy names, in a deployed function's address denials, the
// variables that would allow the address.
var Remedy = fetch.Remedy{Where: "deployed", Network: "ALLOW_NETWORKS=%s", Private: "ALLOW_PRIVATE_NETWORKS=true"}

// FromEnv reads Config through getenv (os.Getenv when nil). The error names
// every missing or bad variable at once.
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var errs []error
	need := func(name string) string {
		v := getenv(name)
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is not set", name))
		}
		return v
	}
	c := Config{
		TableName:      need("TABLE_NAME"),
		OutputQueueURL: need("OUTPUT_QUEUE_URL"),
		InputQueueURL:  getenv("INPUT_QUEUE_URL"),
		WakeQueueURL:   getenv("WAKE_QUEUE_URL"),
		ParamPath:      need("PARAM_PATH"),
		LogLevel:       getenv("LOG_LEVEL"),
		ShardCount:     1,
		CheckRun:       55 * time.Second,
		BodyBucket:     getenv("BODY_BUCKET"),
		// The historical SQS limit, which every endpoint accepts.
		OutputMaxMessageBytes: 256 << 10,
		EphemeralStorageMB:    DefaultEphemeralStorageMB,
	}
	if v := getenv("EPHEMERAL_STORAGE_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < DefaultEphemeralStorageMB || n > 10240 {
			errs = append(errs, fmt.Errorf("EPHEMERAL_STORAGE_MB=%q: want the function's EphemeralStorage, MB from 512 to 10240", v))
		}
		c.EphemeralStorageMB = n
	}
	if v := getenv("BODY_RETENTION_DAYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3650 {
			errs = append(errs, fmt.Errorf("BODY_RETENTION_DAYS=%q: want a whole number of days from 1 to 3650", v))
		}
		c.BodyRetention = time.Duration(n) * 24 * time.Hour
	}
	switch v := getenv("WARC_OUTPUT"); v {
	case "", "false":
	case "true":
		c.WarcOutput = true
		if c.BodyBucket == "" {
			errs = append(errs, errors.New("WARC_OUTPUT=true needs BODY_BUCKET, where the segments go"))
		}
	default:
		errs = append(errs, fmt.Errorf("WARC_OUTPUT=%q: want true or false", v))
	}
	if v := getenv("OUTPUT_MAX_MESSAGE_BYTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 16<<10 || n > 1<<20 {
			errs = append(errs, fmt.Errorf("OUTPUT_MAX_MESSAGE_BYTES=%q: want bytes from 16384 to 1048576", v))
		}
		c.OutputMaxMessageBytes = n
	}
	if v := getenv("SHARD_COUNT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 16 {
			errs = append(errs, fmt.Errorf("SHARD_COUNT=%q: want a whole number from 1 to 16", v))
		}
		c.ShardCount = n
	}
	c.Addresses = fetch.AddressPolicy{}.WithRemedy(Remedy)
	if v := getenv("ALLOW_PRIVATE_NETWORKS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("ALLOW_PRIVATE_NETWORKS=%q: want true or false", v))
		}
		if b {
			c.Addresses = c.Addresses.OpenPrivate()
		}
	}
	if v := getenv("ALLOW_NETWORKS"); v != "" {
		nets, err := fetch.ParseNetworks(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("ALLOW_NETWORKS=%q: %w", v, err))
		}
		c.Addresses = c.Addresses.Open(nets...)
	}
	if v := getenv("CHECK_RUN_SECONDS"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 900) || time.Duration(f*float64(time.Second)) <= 0 {
			errs = append(errs, fmt.Errorf("CHECK_RUN_SECONDS=%q: want seconds above 0, at most 900", v))
		}
		c.CheckRun = time.Duration(f * float64(time.Second))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("function environment: %w", err)
	}
	return c, nil
}

// Logger returns the JSON logger at the configured level (info by default).
func (c Config) Logger() *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
