package wiring_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/urldownloader/urldownloader/shared/runtime/wiring"
)

func TestLogger(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	t.Run("request id, function, cold start", func(t *testing.T) {
		var buf bytes.Buffer
		log := wiring.Logger(&buf, env(map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "check-fn"}))
		first := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
		second := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-2"})
		log.InfoContext(first, "a", "host", "example.com")
		log.With("shard", 1).InfoContext(second, "b")
		log.Info("c")
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 3 {
			t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
		}
		var got []map[string]any
		for _, l := range lines {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("not JSON: %s", l)
			}
			got = append(got, m)
		}
		for i, want := range []struct {
			id   any
			cold any
		}{{"req-1", true}, {"req-2", false}, {nil, nil}} {
			if got[i]["requestId"] != want.id || got[i]["coldStart"] != want.cold || got[i]["function"] != "check-fn" || got[i]["level"] != "INFO" {
				t.Errorf("line %d: %v, want requestId %v coldStart %v function check-fn", i, got[i], want.id, want.cold)
			}
		}
	})
	for _, tc := range []struct {
		name  string
		env   map[string]string
		debug bool
		info  bool
	}{
		{"default info", nil, false, true},
		{"lambda level wins", map[string]string{"AWS_LAMBDA_LOG_LEVEL": "DEBUG", "LOG_LEVEL": "error"}, true, true},
		{"older LOG_LEVEL", map[string]string{"LOG_LEVEL": "warn"}, false, false},
		{"bad value falls through", map[string]string{"AWS_LAMBDA_LOG_LEVEL": "LOUD", "LOG_LEVEL": "debug"}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := wiring.Logger(&bytes.Buffer{}, env(tc.env))
			if got := log.Enabled(context.Background(), -4); got != tc.debug {
				t.Errorf("debug enabled %v, want %v", got, tc.debug)
			}
			if got := log.Enabled(context.Background(), 0); got != tc.info {
				t.Errorf("info enabled %v, want %v", got, tc.info)
			}
		})
	}
}
