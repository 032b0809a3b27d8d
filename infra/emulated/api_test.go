package emulated_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestPostStores posts 1500 URLs through POST /urls (two requests: 1000
// items and 502) with two invalid items in the second request: every valid
// URL is accepted with the ID the downloader gives it, the invalid ones are
// refused under their index in the whole list (not in their request), and
// the store holds exactly the accepted URLs under those IDs, due. (Fetching
// is TestPostThenFetch: 1500 results through moto's SQS take a minute.)
func TestPostStores(t *testing.T) {
	t.Parallel()
	const hosts, perHost = 30, 50
	site, err := demosite.Start(demosite.Options{Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy(), Params: map[string]string{"FetchDelay": "50ms", "CheckHostPeriod": "2s"}})

	valid := site.URLs(perHost)
	// Invalid items at known indexes past the first request's 1000: the
	// first item of the second request and one in its middle.
	bad := map[int]string{
		1000: "ftp://x/",
		1377: "http://example.com/" + strings.Repeat("a", 3000),
	}
	items := make([]urlmsg.Input, 0, len(valid)+len(bad))
	for _, u := range valid {
		for b, ok := bad[len(items)]; ok; b, ok = bad[len(items)] {
			items = append(items, urlmsg.Input{URL: b})
		}
		items = append(items, urlmsg.Input{URL: u})
	}
	if len(items) != len(valid)+len(bad) {
		t.Fatalf("built %d items, want %d", len(items), len(valid)+len(bad))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	began := time.Now()
	sent, err := p.Post(ctx, items)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	t.Logf("posted %d items in %v", len(items), time.Since(began))

	if len(sent.Expected) != len(valid) {
		t.Errorf("%d urls accepted, want %d", len(sent.Expected), len(valid))
	}
	var gotURLs []string
	for id, m := range sent.Expected {
		if len(id) != 24 || m.ID != id {
			t.Errorf("expected entry %q holds message %+v", id, m)
		}
		gotURLs = append(gotURLs, m.URL)
	}
	slices.Sort(gotURLs)
	wantURLs := slices.Sorted(slices.Values(valid))
	if !slices.Equal(gotURLs, wantURLs) {
		t.Errorf("accepted urls differ from the valid ones posted (%d vs %d)", len(gotURLs), len(wantURLs))
	}

	if len(sent.Rejected) != len(bad) {
		t.Errorf("%d items refused, want %d: %+v", len(sent.Rejected), len(bad), sent.Rejected)
	}
	seenBad := map[int]bool{}
	for _, r := range sent.Rejected {
		want, ok := bad[r.Index]
		switch {
		case !ok:
			t.Errorf("item %d refused (%q: %s), want only items 1000 and 1377 refused", r.Index, short(r.URL), r.Error)
		case r.Error == "":
			t.Errorf("item %d refused without a reason", r.Index)
		case r.URL == "" || !strings.HasPrefix(want, strings.TrimSuffix(r.URL, "…")):
			t.Errorf("item %d refused as %q, want (a prefix of) the posted %q", r.Index, r.URL, short(want))
		}
		if seenBad[r.Index] {
			t.Errorf("item %d refused twice", r.Index)
		}
		seenBad[r.Index] = true
	}

	// Before any check runs, the store holds exactly the accepted URLs,
	// under the IDs Post reported, each host's in the posted order.
	byURL := map[string]urlmsg.Message{}
	for _, m := range sent.Expected {
		byURL[m.URL] = m
	}
	byHost := map[string][]string{} // host -> IDs in posted order
	for _, in := range items {
		if m, ok := byURL[in.URL]; ok {
			byHost[m.Host] = append(byHost[m.Host], m.ID)
		}
	}
	if len(byHost) != hosts {
		t.Errorf("accepted urls span %d hosts, want %d", len(byHost), hosts)
	}
	for host, ids := range byHost {
		h, err := p.Services().Store.Load(ctx, hostqueue.QueueKey(host, false), 2*perHost)
		if err != nil {
			t.Errorf("load %s: %v", host, err)
			continue
		}
		var stored []string
		for _, e := range h.Head {
			stored = append(stored, e.ID)
		}
		if h.Pending != len(ids) || !slices.Equal(stored, ids) || h.Due.IsZero() {
			t.Errorf("host %s: %d pending, due %v, ids %v; want the %d posted ids %v, due", host, h.Pending, h.Due, stored, len(ids), ids)
		}
	}
}

// TestPostThenFetch: URLs handed over through POST /urls are in the store
// when Post returns, and a run fetches every one with its page, politely.
func TestPostThenFetch(t *testing.T) {
	t.Parallel()
	site, err := demosite.Start(demosite.Options{Hosts: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy(), Params: map[string]string{"FetchDelay": "50ms", "CheckHostPeriod": "2s"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	valid := site.URLs(5)
	sent, err := p.Post(ctx, inputs(valid))
	if err != nil || len(sent.Rejected) > 0 || len(sent.Expected) != len(valid) {
		t.Fatalf("post: %v, %d accepted, refused %+v", err, len(sent.Expected), sent.Rejected)
	}
	_, got := runExpected(ctx, t, p, sent.Expected)
	for id, m := range sent.Expected {
		r := got[id]
		switch {
		case r.ID == "":
			// runExpected reported it.
		case r.Status != result.StatusFetched || r.URL != m.URL:
			t.Errorf("%s: %s for %s (err %q), want fetched", id, r.Status, r.URL, r.Error)
		default:
			u, _ := url.Parse(r.URL)
			if want := demosite.Body(u.Host, u.Path); r.Data != want {
				t.Errorf("%s: body %q, want %q", r.URL, r.Data, want)
			}
		}
	}
	if gap, host := demosite.MinGap(site.Requests()); gap < 50*time.Millisecond {
		t.Errorf("requests to %s only %s apart, want >= 50ms", host, gap)
	}
}

func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
