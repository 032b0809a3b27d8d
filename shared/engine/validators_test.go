package engine_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// conditional answers path with a page whose ETag is `"<path>"`, and 304
// (repeating the ETag) to a request that sends it back; every path in
// moved answers 301 to its target instead.
func conditional(moved map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if to, ok := moved[r.URL.Path]; ok {
			w.Header().Set("Location", to)
			w.Header().Set("ETag", `"moved`+r.URL.Path+`"`)
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		etag := `"` + r.URL.Path + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		page(w, r)
	}
}

// hit is one page request as a site saw it.
type hit struct{ path, ifNoneMatch string }

// hits lists the site's page requests from the from-th request on
// (robots.txt left out), with the validator each carried.
func (s *site) hits(from int) []hit {
	var out []hit
	for i, p := range s.paths() {
		if i >= from && p != "/robots.txt" {
			out = append(out, hit{p, s.header(i).Get("If-None-Match")})
		}
	}
	return out
}

// submit ingests payload as an input message from source would be, and
// returns the accepted messages and the item errors.
func (e *env) submit(source, payload string) ([]urlmsg.Message, []urlmsg.ItemError) {
	e.t.Helper()
	msgs, bad, err := urlmsg.Parse(source, []byte(payload))
	if err != nil {
		e.t.Fatalf("parse %s: %v", payload, err)
	}
	in := &hostqueue.Ingester{Store: e.store, Publisher: e.pub, Now: time.Now}
	if res := in.Ingest(e.t.Context(), hostqueue.IngestParams{PersistLimit: e.params().PersistLimit}, msgs); len(res.Failed) != 0 {
		e.t.Fatalf("ingest %s: %v", payload, res.Failed)
	}
	return msgs, bad
}

// resultOf is the only result with id.
func (e *env) resultOf(id string) result.Result {
	e.t.Helper()
	var out []result.Result
	for _, r := range e.pub.all() {
		if r.ID == id {
			out = append(out, r)
		}
	}
	if len(out) != 1 {
		e.t.Fatalf("%d results with id %s, want 1; all results: %s", len(out), id, describe(e.pub.all()))
	}
	return out[0]
}

// resubmission is the input that asks for res's URL again, conditionally:
// the result's url, etag, lastModified and validatorsUrl as they are, as
// docs/messages.md tells a user to send them.
func resubmission(t *testing.T, res result.Result) string {
	t.Helper()
	b, err := json.Marshal(struct {
		URL           string `json:"url"`
		ETag          string `json:"etag,omitempty"`
		LastModified  string `json:"lastModified,omitempty"`
		ValidatorsURL string `json:"validatorsUrl,omitempty"`
	}{res.URL, res.ETag, res.LastModified, res.ValidatorsURL})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestValidatorsForARedirectTarget: URL /a 301s to /b on its host. Its
// result reports /b's validators and says they are /b's (validatorsUrl,
// and location); sent back as they are, they make the next fetch
// conditional where they belong: /a is asked without them, /b with them,
// and the answer is not_modified, reporting /b still. Validators without
// validatorsUrl keep going to the URL itself (hop 0), and a bad
// validatorsUrl is refused at ingest, its neighbour queued.
func TestValidatorsForARedirectTarget(t *testing.T) {
	t.Parallel()
	inBothWorlds(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		var s *site
		moved := map[string]string{}
		s = newSite(t, withRobots(404, "", conditional(moved)))
		a, b := s.url("/a"), s.url("/b")
		moved["/a"] = b

		first, _ := e.submit("first", fmt.Sprintf("%q", a))
		e.runUntil(1, 20*time.Second)
		res := e.resultOf(first[0].ID)
		if res.Status != result.StatusFetched || res.ETag != `"/b"` || res.ValidatorsURL != b || res.Location != b || res.Data != "page /b\n" {
			t.Fatalf("first fetch: %s etag=%s validatorsUrl=%q location=%q data=%q, want /b's page and validators, for %s", res.Status, res.ETag, res.ValidatorsURL, res.Location, res.Data, b)
		}
		if got := s.hits(0); fmt.Sprint(got) != fmt.Sprint([]hit{{"/a", ""}, {"/b", ""}}) {
			t.Fatalf("first fetch requests %v, want /a then /b, unconditional", got)
		}

		// Sent back as the result has them.
		seen := len(s.paths())
		again, _ := e.submit("again", resubmission(t, res))
		e.runUntil(2, 20*time.Second)
		res = e.resultOf(again[0].ID)
		if res.Status != result.StatusNotModified || res.HTTPStatus != http.StatusNotModified || res.ETag != `"/b"` || res.ValidatorsURL != b || res.Location != b || res.Data != "" {
			t.Errorf("conditional refetch: %s http=%d etag=%s validatorsUrl=%q location=%q, want not_modified at %s with its etag", res.Status, res.HTTPStatus, res.ETag, res.ValidatorsURL, res.Location, b)
		}
		if got := s.hits(seen); fmt.Sprint(got) != fmt.Sprint([]hit{{"/a", ""}, {"/b", `"/b"`}}) {
			t.Errorf("conditional refetch requests %v, want /a without validators, then /b with its own", got)
		}

		// Without validatorsUrl the validators are the URL's own, as
		// before: sent to /a, which redirects; /b goes unconditional.
		seen = len(s.paths())
		old, _ := e.submit("old", fmt.Sprintf(`{"url":%q,"etag":"\"/b\""}`, a))
		e.runUntil(3, 20*time.Second)
		if res := e.resultOf(old[0].ID); res.Status != result.StatusFetched || res.ValidatorsURL != b {
			t.Errorf("validators without validatorsUrl: %s validatorsUrl=%q, want /b fetched whole", res.Status, res.ValidatorsURL)
		}
		if got := s.hits(seen); fmt.Sprint(got) != fmt.Sprint([]hit{{"/a", `"/b"`}, {"/b", ""}}) {
			t.Errorf("validators without validatorsUrl: requests %v, want them on /a (hop 0) and none on /b", got)
		}

		// A bad validatorsUrl is refused, for its item alone.
		seen = len(s.paths())
		good, bad := e.submit("bad", fmt.Sprintf(`[{"url":%q,"etag":"\"/b\"","validatorsUrl":"ftp://%s/b"},{"url":%q}]`, a, s.host, b))
		if len(bad) != 1 || bad[0].Index != 0 || !strings.Contains(bad[0].Error, "validatorsUrl") || !strings.Contains(bad[0].Error, "scheme must be http or https") {
			t.Errorf("bad validatorsUrl: item errors %+v, want item 0 refused naming validatorsUrl and its scheme", bad)
		}
		if len(good) != 1 || good[0].URL != b {
			t.Fatalf("bad validatorsUrl: accepted %+v, want its neighbour %s", good, b)
		}
		e.runUntil(4, 20*time.Second)
		if res := e.resultOf(good[0].ID); res.Status != result.StatusFetched || res.ValidatorsURL != "" || res.Location != "" {
			t.Errorf("neighbour of a bad item: %s validatorsUrl=%q location=%q, want fetched, its validators its own", res.Status, res.ValidatorsURL, res.Location)
		}
		if got := s.hits(seen); fmt.Sprint(got) != fmt.Sprint([]hit{{"/b", ""}}) {
			t.Errorf("after a bad item: requests %v, want only its neighbour /b", got)
		}
	})
}

// TestValidatorsTravelAcrossHosts: validators recorded for a target on
// another host go with the chain: the source's hops are asked without
// them, the queued target with them, once; and validators already spent
// on their hop are not queued with a target after it.
func TestValidatorsTravelAcrossHosts(t *testing.T) {
	t.Parallel()
	inBothWorlds(t, func(t *testing.T) {
		p := testParams()
		p.FollowCrossHostRedirects = true
		e := newEnv(t, p)
		target := newSite(t, withRobots(404, "", conditional(nil)))
		var src *site
		moved := map[string]string{}
		src = newSite(t, withRobots(404, "", conditional(moved)))
		moved["/a"] = src.url("/a2")
		moved["/a2"] = target.url("/b")
		b := target.url("/b")

		// For the target: sent there alone.
		msgs, _ := e.submit("far", fmt.Sprintf(`{"url":%q,"etag":"\"/b\"","validatorsUrl":%q}`, src.url("/a"), b))
		e.runUntil(2, 20*time.Second)
		res := e.resultOf(msgs[0].ID)
		if res.Status != result.StatusRedirect || res.Location != b || res.ETag != `"moved/a2"` || res.ValidatorsURL != src.url("/a2") {
			t.Errorf("source: %s location=%q etag=%s validatorsUrl=%q, want redirect to %s reporting /a2's own validators", res.Status, res.Location, res.ETag, res.ValidatorsURL, b)
		}
		next := e.resultOf(urlmsg.MakeID(msgs[0].ID, 0, b))
		if next.Status != result.StatusNotModified || next.URL != b || next.ETag != `"/b"` || next.ValidatorsURL != "" {
			t.Errorf("target: %s url=%s etag=%s validatorsUrl=%q, want not_modified with its own validators", next.Status, next.URL, next.ETag, next.ValidatorsURL)
		}
		if got := src.hits(0); fmt.Sprint(got) != fmt.Sprint([]hit{{"/a", ""}, {"/a2", ""}}) {
			t.Errorf("source requests %v, want /a and /a2 without validators", got)
		}
		if got := target.hits(0); fmt.Sprint(got) != fmt.Sprint([]hit{{"/b", `"/b"`}}) {
			t.Errorf("target requests %v, want /b with its validators", got)
		}

		// For a hop on the source's host: spent there, not queued on.
		srcSeen, targetSeen := len(src.paths()), len(target.paths())
		msgs, _ = e.submit("near", fmt.Sprintf(`{"url":%q,"etag":"\"moved/a2\"","validatorsUrl":%q}`, src.url("/a"), src.url("/a2")))
		e.runUntil(4, 20*time.Second)
		if next := e.resultOf(urlmsg.MakeID(msgs[0].ID, 0, b)); next.Status != result.StatusFetched {
			t.Errorf("target after validators spent upstream: %s, want fetched whole", next.Status)
		}
		if got := src.hits(srcSeen); fmt.Sprint(got) != fmt.Sprint([]hit{{"/a", ""}, {"/a2", `"moved/a2"`}}) {
			t.Errorf("source requests %v, want the validators on /a2 alone", got)
		}
		if got := target.hits(targetSeen); fmt.Sprint(got) != fmt.Sprint([]hit{{"/b", ""}}) {
			t.Errorf("target requests %v, want /b unconditional", got)
		}
	})
}

// TestNotModifiedKeepsValidatorsSent: a 304 that does not repeat the
// validators (it need not send Last-Modified, and some send no ETag)
// reports the ones sent, which still hold, so the next refetch can be
// conditional too.
func TestNotModifiedKeepsValidatorsSent(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		var s *site
		s = newSite(t, withRobots(404, "", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/a" {
				w.Header().Set("Location", s.url("/b"))
				w.WriteHeader(http.StatusMovedPermanently)
				return
			}
			if r.Header.Get("If-Modified-Since") != "" {
				w.WriteHeader(http.StatusNotModified) // no validator repeated
				return
			}
			page(w, r)
		}))
		const lm = "Tue, 01 Dec 2026 10:00:00 GMT"
		msgs, _ := e.submit("src", fmt.Sprintf(`{"url":%q,"etag":"\"x\"","lastModified":%q,"validatorsUrl":%q}`, s.url("/a"), lm, s.url("/b")))
		e.runUntil(1, 20*time.Second)
		res := e.resultOf(msgs[0].ID)
		if res.Status != result.StatusNotModified || res.ETag != `"x"` || res.LastModified != lm || res.ValidatorsURL != s.url("/b") {
			t.Errorf("%s etag=%s lastModified=%q validatorsUrl=%q, want not_modified keeping the validators sent, for /b", res.Status, res.ETag, res.LastModified, res.ValidatorsURL)
		}
		if again := resubmission(t, res); !strings.Contains(again, `"validatorsUrl":"`+s.url("/b")+`"`) {
			t.Errorf("resubmission %s does not name /b", again)
		}
	})
}
