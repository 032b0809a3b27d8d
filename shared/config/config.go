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
	// AllowPrivateNetworks lifts the fetcher's address and port guard. It is
	// an environment setting, not an SSM parameter, so that nobody can open
	// the metadata endpoint to submitted URLs by editing a parameter: the
	// template pins it to false.
	AllowPrivateNetworks bool
	LogLevel             string
	// CheckRun is how long a check invocation keeps starting requests.
	CheckRun time.Duration
	// BodyBucket keeps bodies larger than InlineBodyBytes (check only;
	// empty: none, every body is inline and cut to fit the message).
	BodyBucket string
	// BodyRetention is how long BodyBucket keeps a body (its lifecycle
	// rule); zero when not given.
	BodyRetention time.Duration
	// OutputMaxMessageBytes is the output queue's MaximumMessageSize: the
	// largest result message (default 256 KiB).
	OutputMaxMessageBytes int
}

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
	}
	if v := getenv("BODY_RETENTION_DAYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3650 {
			errs = append(errs, fmt.Errorf("BODY_RETENTION_DAYS=%q: want a whole number of days from 1 to 3650", v))
		}
		c.BodyRetention = time.Duration(n) * 24 * time.Hour
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
	if v := getenv("ALLOW_PRIVATE_NETWORKS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("ALLOW_PRIVATE_NETWORKS=%q: want true or false", v))
		}
		c.AllowPrivateNetworks = b
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
