package engine_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// TestDuplicatesFetchedOnce: 300 copies of one URL, with distinct ids, cost
// one request (robots.txt aside); every id gets its own result carrying
// that fetch. A copy with other validators is another request.
func TestDuplicatesFetchedOnce(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		s := newSite(t, withRobots(404, "", page))
		p := testParams()
		e := newEnv(t, p)
		u := s.url("/same")
		urls := make([]string, 300)
		for i := range urls {
			urls[i] = u
		}
		urls = append(urls, s.url("/other"))
		e.seed(urls...)
		e.seedEntries(func(ent *hostqueue.Entry) { ent.ID += "-cond"; ent.ETag = `"v1"` }, u)
		e.runUntil(len(urls)+1, 5*time.Minute)

		if n := s.count("/same"); n != 2 {
			t.Errorf("/same requested %d times, want 2 (once plain, once conditional)", n)
		}
		if n := s.count("/other"); n != 1 {
			t.Errorf("/other requested %d times, want 1", n)
		}
		rs := e.pub.byURL()[u]
		if len(rs) != 301 {
			t.Fatalf("%d results for %s, want 301", len(rs), u)
		}
		ids := map[string]bool{}
		var sha string
		for _, r := range rs {
			if ids[r.ID] {
				t.Errorf("id %s has two results", r.ID)
			}
			ids[r.ID] = true
			if r.Status != result.StatusFetched || r.HTTPStatus != 200 || r.SHA256 == "" {
				t.Errorf("%s: %s http=%d sha256=%q, want fetched 200 with a digest", r.ID, r.Status, r.HTTPStatus, r.SHA256)
			}
			if sha == "" {
				sha = r.SHA256
			} else if r.SHA256 != sha {
				t.Errorf("%s: sha256 %s, want the one fetch's %s", r.ID, r.SHA256, sha)
			}
		}
		if h := e.load(s.host); h != nil && h.Pending != 0 {
			t.Errorf("%d urls still queued", h.Pending)
		}
	})
}

// TestDuplicatesAfterAParameterChange: a copy of a URL that comes after the
// parameters changed mid-session (MaxBodyBytes here) is fetched again under
// the new ones, not answered from the fetch made under the old.
func TestDuplicatesAfterAParameterChange(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		e := newEnv(t, p)
		var once sync.Once
		s := newSite(t, withRobots(404, "", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/same" {
				once.Do(func() {
					q := e.params()
					q.MaxBodyBytes = 4
					e.setParams(q)
				})
			}
			page(w, r)
		}))
		u := s.url("/same")
		urls := []string{u}
		for i := range 10 { // a round of others: the copy is in the next round
			urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
		}
		urls = append(urls, u)
		e.seed(urls...)
		e.runUntil(len(urls), 5*time.Minute)

		if n := s.count("/same"); n != 2 {
			t.Errorf("/same requested %d times, want 2: once before MaxBodyBytes changed, once after", n)
		}
		var cut int
		for _, r := range e.pub.byURL()[u] {
			if r.Truncated && len(r.Data) == 4 {
				cut++
			}
		}
		if cut != 1 {
			t.Errorf("%d results of %s cut at the new MaxBodyBytes, want the copy's: %s", cut, u, describe(e.pub.byURL()[u]))
		}
	})
}
