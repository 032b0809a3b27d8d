package localmode

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// bigSiteInput is 3,000 URLs of one host among 20 of each of three others,
// in an order where the big host's come first, as a site map would.
func bigSiteInput(t *testing.T, site *demosite.Site) (path string, urls []string) {
	t.Helper()
	hosts := site.Hosts()
	for i := range 3000 {
		urls = append(urls, site.URL(hosts[0], i))
	}
	for _, h := range hosts[1:] {
		for i := range 20 {
			urls = append(urls, site.URL(h, i))
		}
	}
	return writeLines(t, jsonLines(urls)), urls
}

// watchLimit samples every host's queue until stop and fails when one
// ever holds more than limit URLs.
func watchLimit(t *testing.T, rt *Runtime, hosts []string, limit int) (stop func() int) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var most atomic.Int64
	wg.Go(func() {
		for {
			for _, h := range hosts {
				st, err := rt.store.Load(context.Background(), hostqueue.QueueKey(h, false), 0)
				if err == nil {
					if st.Pending > limit {
						t.Errorf("host %s holds %d urls in its queue, above PersistLimit %d", h, st.Pending, limit)
					}
					if int64(st.Pending) > most.Load() {
						most.Store(int64(st.Pending))
					}
				}
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	return func() int { close(done); wg.Wait(); return int(most.Load()) }
}

// wantEachOnce fails unless every URL has exactly one result, fetched.
func wantEachOnce(t *testing.T, rs []result.Result, urls []string) {
	t.Helper()
	byURL := map[string]int{}
	for _, r := range rs {
		byURL[r.URL]++
		if r.Status != result.StatusFetched {
			t.Errorf("%s ended %s (%s), want fetched", r.URL, r.Status, r.Error)
		}
	}
	missing, dups := 0, 0
	for _, u := range urls {
		switch n := byURL[u]; {
		case n == 0:
			missing++
		case n > 1:
			dups++
		}
	}
	if missing > 0 || dups > 0 || len(rs) != len(urls) {
		t.Errorf("%d results for %d urls: %d without a result, %d with several", len(rs), len(urls), missing, dups)
	}
}

// TestBackPressure: a file with one big host and PersistLimit 50 ends with
// every URL fetched, none dropped; the store never holds more than 50 URLs
// of a host, and the small hosts are not kept waiting for the big one.
func TestBackPressure(t *testing.T) {
	t.Parallel()
	const limit = 50
	site := startSite(t, demosite.Options{Hosts: 4})
	in, urls := bigSiteInput(t, site)
	outPath := filepath.Join(t.TempDir(), "out.jsonl")
	var mu sync.Mutex
	last := map[string]time.Time{}
	rt := open(t, Options{
		State: filepath.Join(t.TempDir(), "state.db"), Out: openOut(t, outPath), Addresses: fetch.PrivatePolicy(),
		Params:      map[string]string{"FetchDelay": "1ms", "PersistLimit": fmt.Sprint(limit)},
		IngestBatch: 500,
		OnResult: func(r result.Result) {
			mu.Lock()
			last[r.Host] = time.Now()
			mu.Unlock()
		},
	})
	stop := watchLimit(t, rt, site.Hosts(), limit)
	rep, err := rt.Run(context.Background(), RunOptions{Input: fileInput(t, in)})
	most := stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report %+v; most queued on a host %d", rep, most)
	wantEachOnce(t, readResults(t, outPath), urls)
	if rep.ByStatus[result.StatusDropped] > 0 || rep.Input.URLs != int64(len(urls)) || !rep.Input.EOF {
		t.Errorf("report %+v: want every url read and none dropped", rep)
	}
	if rep.Input.Held < 3000-2*limit {
		t.Errorf("%d urls held back, want most of the big host's 3000", rep.Input.Held)
	}
	// The small hosts' 20 URLs come after the big host's 3,000 in the
	// file, yet end before it: the reader read past the big host.
	big := site.Hosts()[0]
	for _, h := range site.Hosts()[1:] {
		if !last[h].Before(last[big]) {
			t.Errorf("host %s ended at %s, after the big host %s (%s): it waited behind it", h, last[h], big, last[big])
		}
	}
	// The overflow is empty at the end.
	if keys, err := rt.ledger.heldKeys(context.Background()); err != nil || len(keys) > 0 {
		t.Errorf("held keys at the end: %v (%v), want none", keys, err)
	}
}

// TestBackPressureWithoutState: the in-memory state holds back too (the
// overflow in a scratch database).
func TestBackPressureWithoutState(t *testing.T) {
	t.Parallel()
	site := startSite(t, demosite.Options{Hosts: 2})
	var urls []string
	for i := range 300 {
		urls = append(urls, site.URL(site.Hosts()[i%2], i))
	}
	outPath := filepath.Join(t.TempDir(), "out.jsonl")
	rt := open(t, Options{Out: openOut(t, outPath), Addresses: fetch.PrivatePolicy(),
		Params: map[string]string{"FetchDelay": "1ms", "PersistLimit": "25"}, IngestBatch: 100})
	rep, err := rt.Run(context.Background(), RunOptions{Input: fileInput(t, writeLines(t, jsonLines(urls)))})
	if err != nil {
		t.Fatal(err)
	}
	wantEachOnce(t, readResults(t, outPath), urls)
	if rep.Input.Held == 0 {
		t.Errorf("report %+v: nothing held back with PersistLimit 25", rep)
	}
}

// TestResumeWithHeldBack stops a big-site job while URLs are held back,
// twice, and runs it again with the same state: every URL ends once.
func TestResumeWithHeldBack(t *testing.T) {
	t.Parallel()
	const limit = 50
	site := startSite(t, demosite.Options{Hosts: 4})
	in, urls := bigSiteInput(t, site)
	dir := t.TempDir()
	state, outPath := filepath.Join(dir, "state.db"), filepath.Join(dir, "out.jsonl")
	run := func(stopAfter int) Report {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var n atomic.Int64
		rt, err := Open(context.Background(), Options{
			State: state, Out: openOut(t, outPath), Addresses: fetch.PrivatePolicy(), Log: testLog(t),
			Params:      map[string]string{"FetchDelay": "1ms", "PersistLimit": fmt.Sprint(limit)},
			IngestBatch: 500,
			OnResult: func(result.Result) {
				if n.Add(1) == int64(stopAfter) {
					cancel()
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		rep, err := rt.Run(ctx, RunOptions{Input: fileInput(t, in)})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("stop after %d: resumed %d, input %+v, results %d, stopped %v, missing %d", stopAfter, rep.Resumed, rep.Input, rep.Results, rep.Stopped, rep.MissingCount)
		return rep
	}
	first := run(400)
	if !first.Stopped || first.MissingCount == 0 {
		t.Fatalf("first run %+v: want it stopped with urls left", first)
	}
	if first.Input.Held == 0 {
		t.Fatalf("first run held nothing back: the test does not test resume with held urls")
	}
	second := run(1200)
	if second.Resumed == 0 {
		t.Errorf("second run resumed nothing")
	}
	last := run(0)
	if last.Stopped || last.MissingCount > 0 {
		t.Errorf("last run %+v: want it to finish", last)
	}
	wantEachOnce(t, readResults(t, outPath), urls)
}

// TestServeFullHost: POST /urls for a host whose queue is full answers 503
// with Retry-After for the URLs it could not take, and evicts nothing.
func TestServeFullHost(t *testing.T) {
	t.Parallel()
	site := startSite(t, demosite.Options{Hosts: 1})
	h := site.Hosts()[0]
	outPath := filepath.Join(t.TempDir(), "out.jsonl")
	// No Run: nothing drains the queue.
	rt := open(t, Options{State: filepath.Join(t.TempDir(), "state.db"), Out: openOut(t, outPath), Addresses: fetch.PrivatePolicy(),
		Params: map[string]string{"PersistLimit": "3"}})
	base := listen(t, rt, ServeOptions{})
	post := func(from, n int) (*http.Response, ingesthandler.APIResponse) {
		t.Helper()
		var items []map[string]string
		for i := range n {
			items = append(items, map[string]string{"url": site.URL(h, from+i)})
		}
		b, _ := json.Marshal(items)
		resp, err := http.Post(base+"/urls", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body ingesthandler.APIResponse
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	resp, body := post(0, 2)
	if resp.StatusCode != http.StatusAccepted || body.Accepted != 2 {
		t.Fatalf("first post: %d %+v, want 202 with 2 accepted", resp.StatusCode, body)
	}
	resp, body = post(2, 3)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("post over the limit: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if body.Accepted != 1 || len(body.Errors) != 2 {
		t.Errorf("post over the limit: %+v, want 1 accepted and 2 errors", body)
	}
	for _, e := range body.Errors {
		if !strings.Contains(e.Error, "retry") || !strings.Contains(e.Error, "full") {
			t.Errorf("item error %q, want it to say the queue is full, retry", e.Error)
		}
	}
	q, err := queuedEntries(context.Background(), rt.store)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Values(q))
	want := []string{site.URL(h, 0), site.URL(h, 1), site.URL(h, 2)}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("queued %v, want the first three (nothing evicted)", got)
	}
	if b, _ := os.ReadFile(outPath); len(b) > 0 {
		t.Errorf("results written (a dropped one?): %s", b)
	}
}

// TestByteBudget: the reader's budget lets a take through only when it
// fits (or nothing is taken: a line above the budget goes alone), and a
// close wakes a waiting take with false.
func TestByteBudget(t *testing.T) {
	t.Parallel()
	b := newByteBudget(100)
	if !b.take(60) || !b.take(40) {
		t.Fatal("takes within the budget refused")
	}
	got := make(chan bool, 1)
	go func() { got <- b.take(10) }()
	select {
	case <-got:
		t.Fatal("a take beyond the budget went through")
	case <-time.After(50 * time.Millisecond):
	}
	b.put(60)
	if ok := <-got; !ok {
		t.Fatal("take refused once there was room")
	}
	b.put(50)
	if !b.take(500) {
		t.Fatal("a line larger than the budget was refused with nothing taken")
	}
	go func() { got <- b.take(1) }()
	b.close()
	// Bounds a hang only.
	select {
	case ok := <-got:
		if ok {
			t.Error("take after close went through")
		}
	case <-time.After(time.Minute):
		t.Fatal("close did not wake a waiting take")
	}
}
