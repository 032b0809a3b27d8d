package localmode

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// slowReader hands out its input a little at a time, as a producer piping
// URLs into stdin would, so that stops land while the input is read too.
type slowReader struct {
	r     io.Reader
	chunk int
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.pause)
	return s.r.Read(p[:min(len(p), s.chunk)])
}

// TestResume stops a run at random moments five times (the context ends,
// as Ctrl-C ends it), each time opening the same state and output again,
// then lets it finish: every URL of the input has its result with the
// right page, the site saw each page about once (at most 1% fetched
// again), robots.txt once per host, and the delay held across restarts
// (the last fetch is stored).
func TestResume(t *testing.T) {
	t.Parallel()
	const (
		hosts, pages = 20, 25
		delay        = 100 * time.Millisecond
	)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RESUME_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("RESUME_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	site := startSite(t, demosite.Options{Hosts: hosts})
	urls := site.URLs(pages)
	rng.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
	in := writeLines(t, jsonLines(urls))
	dir := t.TempDir()
	state, outPath := filepath.Join(dir, "state.db"), filepath.Join(dir, "out.jsonl")

	run := func(stopAfter time.Duration) Report {
		t.Helper()
		f, err := os.Open(in)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		out := openOut(t, outPath)
		rt, err := Open(context.Background(), Options{
			State: state, Out: out, Addresses: fetch.PrivatePolicy(), Log: testLog(t),
			Params:      map[string]string{"FetchDelay": delay.String()},
			IngestBatch: 40, IngestWindow: 20 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := rt.Close(); err != nil {
				t.Error(err)
			}
			out.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if stopAfter > 0 {
			time.AfterFunc(stopAfter, cancel)
		}
		began := time.Now()
		rep, err := rt.Run(ctx, RunOptions{Input: &Input{Name: in, R: &slowReader{r: f, chunk: 300, pause: 3 * time.Millisecond}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("run stopped after %s: took %s, resumed=%d read=%d accepted=%d results=%d requests=%d stopped=%v",
			stopAfter, time.Since(began).Round(time.Millisecond), rep.Resumed, rep.Input.Lines, rep.Input.URLs, rep.Results, rep.Requests, rep.Stopped)
		return rep
	}
	for range 5 {
		run(time.Duration(50+rng.IntN(1500)) * time.Millisecond)
	}
	final := run(0)
	if final.Stopped || len(final.Missing) > 0 {
		t.Fatalf("the last run stopped=%v with %d missing", final.Stopped, len(final.Missing))
	}

	want := map[string]string{}
	for i, u := range urls {
		want[urlmsg.MakeID(in+":"+strconv.Itoa(i+1), 0, u)] = u
	}
	got := map[string]int{}
	for _, r := range readResults(t, outPath) {
		u, ok := want[r.ID]
		switch {
		case !ok:
			t.Errorf("result %s for %s is for no line of the input", r.ID, r.URL)
		case r.URL != u || r.Status != result.StatusFetched || r.Data != demosite.Body(hostOfURL(u), pathOfURL(u)):
			t.Errorf("result for %s: %s %s %q", u, r.URL, r.Status, r.Data)
		}
		got[r.ID]++
	}
	for id, u := range want {
		if got[id] == 0 {
			t.Errorf("no result for %s (%s)", u, id)
		}
	}

	reqs := site.Requests()
	robots := count(reqs, func(r demosite.Request) bool { return r.Path == "/robots.txt" })
	refetches := len(reqs) - len(urls) - hosts
	t.Logf("site saw %d requests: %d pages, %d robots.txt, %d beyond one per page and host", len(reqs), len(reqs)-robots, robots, refetches)
	if limit := (len(urls) + 99) / 100; refetches > limit {
		t.Errorf("site saw %d requests for %d urls on %d hosts: %d re-fetches, want at most %d (1%%)", len(reqs), len(urls), hosts, refetches, limit)
	}
	checkPolite(t, reqs, delay)
}

// TestInputChanged: a state refuses to go on with an input whose lines
// already read have changed, rather than skip or repeat lines.
func TestInputChanged(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	in := filepath.Join(dir, "urls.txt")
	write := func(s string) {
		if err := os.WriteFile(in, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runOnce := func() (Report, error) {
		// Private addresses are not allowed: the URLs end denied at ingest,
		// without a request.
		// Each run ends (and drops the state's lock) before the next.
		rt, err := Open(context.Background(), Options{State: state, Out: openOut(t, filepath.Join(dir, "out")), Log: testLog(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return rt.Run(ctx, RunOptions{Input: fileInput(t, in)})
	}
	write("http://127.0.0.1:1/a\nhttp://127.0.0.1:1/b\n")
	if rep, err := runOnce(); err != nil || rep.Input.URLs != 2 || rep.ByStatus[result.StatusDenied] != 2 {
		t.Fatalf("first run: %+v, %v", rep, err)
	}
	// Lines added at the end are read on; the first two are not again.
	write("http://127.0.0.1:1/a\nhttp://127.0.0.1:1/b\nhttp://127.0.0.1:1/c\n")
	rep, err := runOnce()
	if err != nil || rep.Input.Skipped != 2 || rep.Input.URLs != 1 || rep.Results != 1 {
		t.Fatalf("appended run: %+v, %v; want 2 lines skipped and 1 read", rep, err)
	}
	// A changed line already read is refused.
	write("http://127.0.0.1:1/A\nhttp://127.0.0.1:1/b\nhttp://127.0.0.1:1/c\n")
	if _, err := runOnce(); !errors.Is(err, ErrInputChanged) {
		t.Fatalf("changed input: error %v, want ErrInputChanged", err)
	}
	// So is a shorter one.
	write("http://127.0.0.1:1/a\n")
	if _, err := runOnce(); !errors.Is(err, ErrInputChanged) {
		t.Fatalf("shortened input: error %v, want ErrInputChanged", err)
	}
}

// TestTwoProcessesOneState runs two runtimes on one state file at once,
// with short check runs so that shard leases pass between them: the
// leases are the store's, so no host is ever worked by both at once.
func TestTwoProcessesOneState(t *testing.T) {
	t.Parallel()
	const delay = 200 * time.Millisecond
	site := startSite(t, demosite.Options{Hosts: 3})
	urls := site.URLs(8)
	in := writeLines(t, jsonLines(urls))
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	opts := func(out string) Options {
		return Options{
			State: state, SharedState: true, Out: openOut(t, filepath.Join(dir, out)), Addresses: fetch.PrivatePolicy(), ShardCount: 4,
			CheckRun: 700 * time.Millisecond, Params: map[string]string{"FetchDelay": delay.String(), "FetchTimeout": "2s", "MaxCrawlDelay": "1s"},
		}
	}
	a, b := open(t, opts("a.jsonl")), open(t, opts("b.jsonl"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var repB Report
	bctx, stopB := context.WithCancel(ctx)
	wg.Go(func() {
		var err error
		if repB, err = b.Run(bctx, RunOptions{Serve: true}); err != nil {
			t.Error(err)
		}
	})
	repA, err := a.Run(ctx, RunOptions{Input: fileInput(t, in)})
	stopB()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a: requests=%d results=%d; b: requests=%d results=%d", repA.Requests, repA.Results, repB.Requests, repB.Results)
	if repB.Requests == 0 {
		t.Log("the second process made no request: leases never passed to it in this run")
	}
	got := map[string]bool{}
	for _, name := range []string{"a.jsonl", "b.jsonl"} {
		for _, r := range readResults(t, filepath.Join(dir, name)) {
			got[r.URL] = true
		}
	}
	for _, u := range urls {
		if !got[u] {
			t.Errorf("no result for %s in either output", u)
		}
	}
	checkPolite(t, site.Requests(), delay)
}
