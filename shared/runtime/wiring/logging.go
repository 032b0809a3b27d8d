package wiring

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Logger returns the functions' JSON logger writing to w: every line
// carries the function's name and, inside an invocation, its requestId and
// whether it is the process's first (coldStart). The level is Lambda's
// AWS_LAMBDA_LOG_LEVEL (the function's LoggingConfig), else LOG_LEVEL
// (older configurations), else info.
//
// lambdacontext.NewLogHandler (aws-lambda-go 1.55) adds the request id but
// writes text unless the log format is JSON, knows no LOG_LEVEL and says
// nothing of cold starts, so this is the equivalent with those.
func Logger(w io.Writer, getenv func(string) string) *slog.Logger {
	level := slog.LevelInfo
	for _, name := range []string{"AWS_LAMBDA_LOG_LEVEL", "LOG_LEVEL"} {
		v := strings.ToUpper(strings.TrimSpace(getenv(name)))
		switch v {
		case "TRACE":
			v = "DEBUG"
		case "FATAL":
			v = "ERROR"
		}
		var l slog.Level
		if v != "" && l.UnmarshalText([]byte(v)) == nil {
			level = l
			break
		}
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	fn := getenv("AWS_LAMBDA_FUNCTION_NAME")
	var base slog.Handler = h
	if fn != "" {
		base = h.WithAttrs([]slog.Attr{slog.String("function", fn)})
	}
	return slog.New(&requestHandler{inner: base, cold: &coldStart{}})
}

// coldStart remembers the process's first request id.
type coldStart struct {
	mu    sync.Mutex
	first string
}

func (c *coldStart) is(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first == "" {
		c.first = id
	}
	return c.first == id
}

// requestHandler adds the invocation's requestId and coldStart, read from
// the context a ...Context logging call passes.
type requestHandler struct {
	inner slog.Handler
	cold  *coldStart
}

func (h *requestHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *requestHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r = r.Clone()
		if !hasAttr(r, "requestId") {
			// Some lines name it themselves (a run's owner).
			r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
		}
		r.AddAttrs(slog.Bool("coldStart", h.cold.is(lc.AwsRequestID)))
	}
	return h.inner.Handle(ctx, r)
}

func (h *requestHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &requestHandler{inner: h.inner.WithAttrs(as), cold: h.cold}
}

func (h *requestHandler) WithGroup(name string) slog.Handler {
	return &requestHandler{inner: h.inner.WithGroup(name), cold: h.cold}
}

func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}
