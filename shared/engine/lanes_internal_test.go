package engine

import (
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// TestLaneHostRate: the admission counts a host at its FetchDelay's rate, as
// before, unless its rule gives it several connections: then at that many
// times the rule's delay's rate.
func TestLaneHostRate(t *testing.T) {
	p := params.Defaults()
	p.FetchDelay = time.Second
	rules, err := params.ParseHostRules(`[{"match":"cdn.example","delay":"0s","connections":8},` +
		`{"match":"four.example","delay":"500ms","connections":4},{"match":"one.example","delay":"100ms"},` +
		`{"match":"nodelay.example","connections":3}]`)
	if err != nil {
		t.Fatal(err)
	}
	p.HostRules = rules
	for _, tc := range []struct {
		key  string
		want float64
	}{
		{"plain.example", 1},
		{"one.example", 1}, // one connection: counted as every host is
		{"four.example", 8},
		{"img.cdn.example", 80}, // delay 0 is reckoned at minHostDelay
		{"nodelay.example", 3},  // FetchDelay's rate, three times
	} {
		if got := hostRate(p, tc.key); got != tc.want {
			t.Errorf("hostRate(%s) = %v, want %v", tc.key, got, tc.want)
		}
	}
}

func TestWorse(t *testing.T) {
	for _, tc := range []struct{ a, b, want outcome }{
		{outDone, outRetry, outRetry},
		{outRetry, outDone, outRetry},
		{outRetry, outStop, outStop},
		{outStop, outRetry, outStop},
		{outGiveUp, outRetry, outGiveUp},
		{outGiveUp, outStop, outStop},
		{outDone, outDone, outDone},
	} {
		if got := worse(tc.a, tc.b); got != tc.want {
			t.Errorf("worse(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
