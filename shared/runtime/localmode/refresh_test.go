package localmode

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/nginxtest"
	"github.com/urldownloader/urldownloader/shared/domain/refresh"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestRefreshOnNginx: a refreshing URL on a real server whose file
// changes. Every refetch is conditional (nginx's own ETag), a result is
// written exactly for the first fetch and the fetch after the change,
// the job keeps running while the URL refreshes, and a second run on the
// same state goes on with the schedule: its first fetch is not earlier
// than due.
func TestRefreshOnNginx(t *testing.T) {
	t.Parallel()
	const every = 10 * time.Second // MinRefresh's least
	srv := nginxtest.Start(t,
		`log_format cond '$msec $request_uri $status "$http_if_none_match"';`,
		`root {{root}}; access_log {{root}}/../cond.log cond;`)
	root := filepath.Join(srv.Dir, "www")
	feed := filepath.Join(root, "feed.xml")
	write := func(body string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(feed, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		// nginx's ETag is the file's mtime and size: set the time, so two
		// versions never share one.
		if err := os.Chtimes(feed, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write("<rss>1</rss>", time.Unix(1_700_000_000, 0))
	url := "http://" + srv.Addr + "/feed.xml"
	in := writeLines(t, []string{`{"url": "` + url + `", "refresh": "10s"}`})
	dir := t.TempDir()
	state, outPath := filepath.Join(dir, "state.db"), filepath.Join(dir, "out.jsonl")

	// fetches are the requests of the feed in nginx's log: when (nginx's
	// clock at the answer, ms), status and If-None-Match.
	type fetched struct {
		at   time.Time
		line string
	}
	var fetches []fetched
	logged := 0
	poll := func() {
		b, _ := os.ReadFile(filepath.Join(srv.Dir, "cond.log"))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for _, l := range lines[min(logged, len(lines)):] {
			msec, rest, _ := strings.Cut(l, " ")
			at, err := strconv.ParseFloat(msec, 64)
			if err == nil && strings.HasPrefix(rest, "/feed.xml ") {
				fetches = append(fetches, fetched{time.UnixMilli(int64(at * 1000)), rest})
			}
		}
		logged = len(lines)
	}
	run := func(until func() bool) Report {
		t.Helper()
		out := openOut(t, outPath)
		rt, err := Open(context.Background(), Options{
			State: state, Out: out, Addresses: fetch.PrivatePolicy(), Log: testLog(t),
			Params: map[string]string{"MinRefresh": "10s", "FetchDelay": "0"},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		// Bounds a hang only: the schedule needs about 4 intervals.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		go func() {
			for ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
				poll()
				if until() {
					cancel()
				}
			}
		}()
		rep, err := rt.Run(ctx, RunOptions{Input: fileInput(t, in)})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Stopped {
			t.Errorf("the run ended by itself with a refreshing URL kept: %+v", rep)
		}
		return rep
	}

	// The schedule's due times are its first (the job's start plus the
	// offset FirstDue spreads it by) plus k intervals; a fixed interval
	// keeps that phase, so a late fetch is followed by a shorter gap,
	// never by a fetch before its due time.
	epoch := time.Unix(0, 0)
	spread := refresh.FirstDue(epoch, every, srv.Addr+" "+url).Sub(epoch)
	start := time.Now()
	changed := false
	run(func() bool {
		if len(fetches) == 2 && !changed {
			write("<rss>2, longer</rss>", time.Unix(1_700_000_100, 0))
			changed = true
		}
		return len(fetches) >= 4
	})
	firstRun := len(fetches)
	run(func() bool { return len(fetches) >= firstRun+1 })

	for i, f := range fetches {
		// nginx logs an absent If-None-Match as "-".
		inm := f.line[strings.Index(f.line, `"`):]
		if i == 0 && inm != `"-"` {
			t.Errorf("the first fetch was conditional: %s", f.line)
		}
		if i > 0 && inm == `"-"` {
			t.Errorf("refetch %d was not conditional: %s", i, f.line)
		}
		// nginx's $msec is cut to the millisecond.
		if due := start.Add(spread + time.Duration(i)*every); f.at.Before(due.Add(-time.Millisecond)) {
			t.Errorf("fetch %d came %s before its due time, %s after the job's start (%v)", i, due.Sub(f.at), due.Sub(start), f.line)
		}
	}
	// The fetch after the change got the new version; the others 304.
	if len(fetches) < 5 {
		t.Fatalf("%d fetches of the feed over two runs, want 5", len(fetches))
	}
	var statuses []string
	for _, f := range fetches {
		statuses = append(statuses, strings.Fields(f.line)[1])
	}
	if got := strings.Join(statuses[:4], " "); got != "200 304 200 304" {
		t.Errorf("statuses %s, want 200 304 200 304 (the file changed after the second fetch)", got)
	}
	rs := readResults(t, outPath)
	if len(rs) != 2 {
		t.Fatalf("%d results, want 2 (the first fetch, the change)", len(rs))
	}
	for i, want := range []string{"<rss>1</rss>", "<rss>2, longer</rss>"} {
		r := rs[i]
		if r.Seq != i+1 || r.Changed == nil || !*r.Changed || r.Data != want || r.Status != result.StatusFetched || r.Final {
			t.Errorf("result %d: seq %d changed %v data %q status %s final %v; want seq %d, changed, %q", i, r.Seq, r.Changed, r.Data, r.Status, r.Final, i+1, want)
		}
		if r.ID != rs[0].ID {
			t.Errorf("result %d has id %s, want the URL's, %s", i, r.ID, rs[0].ID)
		}
	}
}

// TestRefreshCapRejectsLine: a refreshing URL beyond MaxRefreshPerHost is
// a rejected line naming the parameter, as a line the parser refuses;
// the job goes on with the others.
func TestRefreshCapRejectsLine(t *testing.T) {
	t.Parallel()
	site := startSite(t, demosite.Options{Hosts: 1})
	urls := site.URLs(2)
	in := writeLines(t, []string{
		`{"url": "` + urls[0] + `", "refresh": "1h"}`,
		`{"url": "` + urls[1] + `", "refresh": "1h"}`,
	})
	dir := t.TempDir()
	rejected := make(chan Rejected, 2)
	rt := open(t, Options{
		State: filepath.Join(dir, "state.db"), Out: openOut(t, filepath.Join(dir, "out.jsonl")), Addresses: fetch.PrivatePolicy(),
		Params:   map[string]string{"MaxRefreshPerHost": "1"},
		OnReject: func(r Rejected) { rejected <- r },
	})
	// Bounds a hang only: the job runs until stopped, with one URL
	// refreshing hourly.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := rt.Run(ctx, RunOptions{Input: fileInput(t, in)})
		done <- err
	}()
	select {
	case r := <-rejected:
		if r.Line != 2 || !strings.Contains(r.Error, "MaxRefreshPerHost") {
			t.Errorf("rejected %+v, want line 2 naming MaxRefreshPerHost", r)
		}
	case err := <-done:
		t.Fatalf("the run ended (%v) with no line rejected", err)
	case <-ctx.Done():
		t.Fatal("no line rejected")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

// TestRefreshStopEndsJob: the same URL sent again with refresh "0" (a
// line appended to the list) ends its schedule with a stopped, final
// result under the schedule's id, the stop gets one under its own id, and
// with nothing else to do the job then ends by itself.
func TestRefreshStopEndsJob(t *testing.T) {
	t.Parallel()
	site := startSite(t, demosite.Options{Hosts: 1})
	u := site.URLs(1)[0]
	// The first fetch is due within the first interval: the shortest.
	in := writeLines(t, []string{`{"url": "` + u + `", "refresh": "10s"}`})
	dir := t.TempDir()
	state, outPath := filepath.Join(dir, "state.db"), filepath.Join(dir, "out.jsonl")
	run := func(first bool) Report {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		rt := open(t, Options{
			State: state, Out: openOut(t, outPath), Addresses: fetch.PrivatePolicy(),
			Params: map[string]string{"MinRefresh": "10s"},
			OnResult: func(result.Result) {
				if first {
					cancel()
				}
			},
		})
		rep, err := rt.Run(ctx, RunOptions{Input: fileInput(t, in)})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Close(); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	run(true)
	f, err := os.OpenFile(in, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"url": "` + u + `", "refresh": "0"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if rep := run(false); rep.Stopped || rep.DoneElsewhere != 0 || rep.Expected != 2 || rep.Results != 2 || rep.MissingCount != 0 {
		t.Errorf("the job with its only schedule stopped: %+v; want it ended by itself, nothing done elsewhere, the schedule and the stop expected and answered", rep)
	}
	rs := readResults(t, outPath)
	if len(rs) != 3 {
		t.Fatalf("%d results, want 3 (the first fetch, the stop's own, the schedule's last)", len(rs))
	}
	var last, stop *result.Result
	for i := range rs[1:] {
		if r := &rs[1+i]; r.ID == rs[0].ID {
			last = r
		} else {
			stop = r
		}
	}
	if last == nil || last.Status != result.StatusStopped || !last.Final || last.Seq != 2 {
		t.Errorf("the schedule's last result %+v, want stopped, final, seq 2, id %s", last, rs[0].ID)
	}
	// The stop is an item of the input too: its id ends in a result.
	if stop == nil || stop.Status != result.StatusStopped || !stop.Final || stop.URL != u {
		t.Errorf("the stop's own result %+v, want stopped, final, for %s", stop, u)
	}
}

// TestServeKeepsRefreshes: serve mode takes a refreshing URL on POST
// /urls and keeps its schedule (refetched, each result under its id with
// the next seq) until the same URL is posted with refresh "0".
func TestServeKeepsRefreshes(t *testing.T) {
	t.Parallel()
	site := startSite(t, demosite.Options{Hosts: 1})
	u := site.URLs(1)[0]
	dir := t.TempDir()
	results := make(chan result.Result, 10)
	rt := open(t, Options{
		State: filepath.Join(dir, "state.db"), Out: openOut(t, filepath.Join(dir, "out.jsonl")), Addresses: fetch.PrivatePolicy(),
		Params:   map[string]string{"MinRefresh": "10s", "FetchDelay": "0"},
		OnResult: func(r result.Result) { results <- r },
	})
	// Bounds a hang only: the schedule needs about two intervals.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := rt.Run(ctx, RunOptions{Serve: true})
		done <- err
	}()
	base := listen(t, rt, ServeOptions{})
	post := func(body string) ingesthandler.APIResponse {
		t.Helper()
		resp, err := http.Post(base+"/urls", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ar ingesthandler.APIResponse
		if err := json.NewDecoder(resp.Body).Decode(&ar); err != nil || resp.StatusCode != http.StatusAccepted || ar.Accepted != 1 {
			t.Fatalf("POST %s: %d %+v %v, want it accepted", body, resp.StatusCode, ar, err)
		}
		return ar
	}
	next := func() result.Result {
		t.Helper()
		select {
		case r := <-results:
			return r
		case <-ctx.Done():
			t.Fatal("no result")
		}
		return result.Result{}
	}
	id := post(`{"url": "` + u + `", "refresh": "10s", "emitUnchanged": true}`).IDs[0]
	for seq := 1; seq <= 2; seq++ {
		if r := next(); r.ID != id || r.Seq != seq || r.Final || r.Status == result.StatusFetchError {
			t.Fatalf("result %+v, want id %s seq %d, not final", r, id, seq)
		}
	}
	if p := rt.Progress(); p.Refreshing != 1 {
		t.Errorf("progress shows %d refreshing urls, want the one kept", p.Refreshing)
	}
	stopID := post(`{"url": "` + u + `", "refresh": "0"}`).IDs[0]
	// Two final results, in either order: the schedule's, under its id,
	// and the stop's own.
	finals := map[string]result.Result{}
	for len(finals) < 2 {
		if r := next(); r.Final {
			finals[r.ID] = r
		}
	}
	if last := finals[id]; last.Status != result.StatusStopped {
		t.Errorf("the schedule's final result %+v, want stopped under id %s", last, id)
	}
	if stop := finals[stopID]; stop.Status != result.StatusStopped || stopID == id {
		t.Errorf("the stop's final result %+v, want stopped under its own id %s", stop, stopID)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}
