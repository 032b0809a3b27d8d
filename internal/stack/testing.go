package stack

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/urldownloader/urldownloader/internal/moto"
)

var testSeq atomic.Int64

// DeployForTest deploys template.yaml on the test binary's shared moto
// server (moto.Shared) and returns the stack and an SDK configuration for
// that server. An empty opts.Prefix is replaced by one unique to this call,
// so tests can run in parallel on one server. Any failure fails t.
func DeployForTest(t testing.TB, opts Options) (*Stack, aws.Config) {
	t.Helper()
	srv := moto.Shared(t)
	cfg, err := moto.AWSConfig(t.Context(), srv.Endpoint)
	if err != nil {
		t.Fatalf("moto config: %v", err)
	}
	tpl, err := Load("")
	if err != nil {
		t.Fatalf("%v", err)
	}
	if opts.Prefix == "" {
		opts.Prefix = UniquePrefix(t.Name())
	}
	st, err := tpl.Deploy(t.Context(), cfg, opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return st, cfg
}

// UniquePrefix returns a valid Options.Prefix that starts with a cleaned-up
// base (e.g. a test name) and is unique in this process and, by a time
// component, across reruns against one long-lived server.
func UniquePrefix(base string) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, base)
	suffix := fmt.Sprintf("-%x%d", time.Now().UnixNano()%0xfffff, testSeq.Add(1))
	if max := 40 - len(suffix); len(clean) > max {
		clean = clean[:max]
	}
	if clean = strings.Trim(clean, "-"); clean == "" {
		clean = "stack"
	}
	return clean + suffix
}
