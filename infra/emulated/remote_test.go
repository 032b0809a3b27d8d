package emulated_test

// The send and receive commands (shared/aws/remote) against a whole
// emulated deployment: they are product code, the deployment is this
// package's, so the test lives here.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/remote"
	"github.com/urldownloader/urldownloader/shared/domain/backoff"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

var fastRetry = backoff.Policy{Base: time.Millisecond, Max: 10 * time.Millisecond, Attempts: 8}

func readResults(t *testing.T, path string) map[string]result.Result {
	t.Helper()
	out := map[string]result.Result{}
	b, _ := os.ReadFile(path)
	for line := range bytes.Lines(b) {
		var r result.Result
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("out line %q: %v", line, err)
		}
		out[r.ID] = r
	}
	return out
}

// TestRemoteCommandsEndToEnd: send a list to the input queue of
// an emulated deployment (infra/emulated: ingest and check running from the
// template's event sources on moto), let it fetch a loopback demo site,
// and receive every result.
func TestRemoteCommandsEndToEnd(t *testing.T) {
	t.Parallel()
	site, err := demosite.Start(demosite.Options{Hosts: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	p, err := emulated.Start(t.Context(), emulated.Options{
		Endpoint: moto.Shared(t).Endpoint, Prefix: stack.UniquePrefix("e2e"), Addresses: fetch.PrivatePolicy(),
		Params: map[string]string{"FetchDelay": "100ms"}, CheckRun: 3 * time.Second, IngestBatchingWindow: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan struct{})
	go func() { defer close(served); p.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })

	urls := site.URLs(8)
	var list strings.Builder
	for _, u := range urls {
		fmt.Fprintln(&list, u)
	}
	c := sqs.NewFromConfig(p.AWS)
	rep, err := remote.Send(t.Context(), remote.SendOptions{SQS: c, QueueURL: p.Stack.InputQueueURL, List: strings.NewReader(list.String()), Retry: fastRetry})
	if err != nil || rep.URLs != int64(len(urls)) {
		t.Fatalf("send: %+v, %v", rep, err)
	}
	out := filepath.Join(t.TempDir(), "results.jsonl")
	// Bounds a hang only: the site answers in a few seconds.
	rctx, rcancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer rcancel()
	rrep, err := remote.Receive(rctx, remote.ReceiveOptions{SQS: c, QueueURL: p.Stack.OutputQueueURL, Out: out, Max: int64(len(urls)), Retry: fastRetry})
	if err != nil {
		t.Fatalf("receive: %+v, %v", rrep, err)
	}
	got := readResults(t, out)
	byURL := map[string]result.Result{}
	for _, r := range got {
		byURL[r.URL] = r
	}
	for _, u := range urls {
		r, ok := byURL[u]
		if !ok || r.Status != result.StatusFetched {
			t.Fatalf("%s: %+v, want fetched", u, r)
		}
		if want := demosite.Body(r.Host, strings.TrimPrefix(u, "http://"+r.Host)); r.Data != want {
			t.Errorf("%s: data %q, want %q", u, r.Data, want)
		}
	}
}
