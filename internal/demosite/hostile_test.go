package demosite_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

func startHostile(t *testing.T) (*demosite.HostileSite, *fetch.Fetcher) {
	t.Helper()
	site, err := demosite.StartHostile(demosite.HostileOptions{Pages: 2, RetryAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	// The downloader's own fetcher, resolving the site's names from its
	// table: no DNS query leaves the machine.
	f := fetch.New(fetch.Options{AllowPrivate: true, Timeout: 700 * time.Millisecond, Resolve: site.Resolve()}, nil)
	t.Cleanup(f.CloseIdleConnections)
	return site, f
}

// TestHostileHostsMisbehave fetches from every hostile host and checks it
// misbehaves as its kind says, seen from the client and in the site's log.
func TestHostileHostsMisbehave(t *testing.T) {
	site, f := startHostile(t)
	get := func(k demosite.Kind, path string) (*fetch.Response, error) {
		return f.Fetch(context.Background(), fetch.Request{URL: "http://" + site.Host(k).Host + path})
	}
	status := func(t *testing.T, k demosite.Kind, path string, want int) *fetch.Response {
		t.Helper()
		resp, err := get(k, path)
		if err != nil {
			t.Fatalf("%s%s: %v, want %d", k, path, err, want)
		}
		if resp.HTTPStatus != want {
			t.Fatalf("%s%s answered %d, want %d", k, path, resp.HTTPStatus, want)
		}
		return resp
	}
	failure := func(t *testing.T, k demosite.Kind, path string, kind fetch.Kind, msg string) {
		t.Helper()
		resp, err := get(k, path)
		if err == nil {
			t.Fatalf("%s%s answered %d, want a %s error", k, path, resp.HTTPStatus, kind)
		}
		if fetch.KindOf(err) != kind || !strings.Contains(err.Error(), msg) {
			t.Fatalf("%s%s: %v (%s), want a %s error mentioning %q", k, path, err, fetch.KindOf(err), kind, msg)
		}
	}

	t.Run("refused", func(t *testing.T) {
		failure(t, demosite.Refused, "/robots.txt", fetch.KindConnection, "connection refused")
	})
	t.Run("hang", func(t *testing.T) {
		failure(t, demosite.Hang, "/robots.txt", fetch.KindTimeout, "within 700ms")
	})
	t.Run("drip", func(t *testing.T) {
		status(t, demosite.Drip, "/robots.txt", 404)
		failure(t, demosite.Drip, "/page/0", fetch.KindTimeout, "read body")
	})
	t.Run("reset", func(t *testing.T) {
		status(t, demosite.Reset, "/robots.txt", 404)
		_, err := get(demosite.Reset, "/page/0")
		if fetch.KindOf(err) != fetch.KindConnection {
			t.Fatalf("reset page: %v (%s), want a connection error", err, fetch.KindOf(err))
		}
		if !errors.Is(err, syscall.ECONNRESET) && !strings.Contains(err.Error(), "unexpected EOF") {
			t.Errorf("reset page: %v, want a reset or a cut body", err)
		}
	})
	t.Run("robots 503", func(t *testing.T) {
		status(t, demosite.Robots503, "/robots.txt", 503)
		status(t, demosite.Robots503, "/robots.txt", 503)
	})
	t.Run("robots 429 then OK", func(t *testing.T) {
		first := time.Now()
		resp := status(t, demosite.Robots429, "/robots.txt", 429)
		if !resp.RetryAfterSet || resp.RetryAfter != time.Second {
			t.Errorf("Retry-After %v (set %v), want 1s", resp.RetryAfter, resp.RetryAfterSet)
		}
		status(t, demosite.Robots429, "/robots.txt", 429)
		time.Sleep(time.Until(first.Add(1100 * time.Millisecond)))
		resp = status(t, demosite.Robots429, "/robots.txt", 200)
		if !strings.Contains(string(resp.Body), "Allow: /") {
			t.Errorf("robots.txt after the wait = %q, want it to allow everything", resp.Body)
		}
		h := site.Host(demosite.Robots429)
		resp = status(t, demosite.Robots429, "/page/1", 200)
		if want := demosite.Body(h.Host, "/page/1"); string(resp.Body) != want {
			t.Errorf("page body %q, want %q", resp.Body, want)
		}
	})
	t.Run("big robots.txt", func(t *testing.T) {
		f := fetch.New(fetch.Options{AllowPrivate: true, Timeout: 5 * time.Second, Resolve: site.Resolve()}, nil)
		resp, err := f.Fetch(context.Background(), fetch.Request{URL: "http://" + site.Host(demosite.BigRobots).Host + "/robots.txt", MaxBodyBytes: 1 << 20})
		if err != nil || resp.HTTPStatus != 200 {
			t.Fatalf("big robots.txt: %v %v", resp, err)
		}
		body := resp.Body
		if n := len(body); n < 599<<10 || n > 600<<10 {
			t.Errorf("robots.txt is %d bytes, want about 600 KiB", n)
		}
		for _, c := range []struct {
			rule     string
			from, to int
		}{
			{"Disallow: /early-a/\n", 0, 200},
			{"Disallow: /early-b/\n", 450 << 10, 451 << 10},
			{"Disallow: /late/\n", 590 << 10, 591 << 10},
		} {
			if i := bytes.Index(body, []byte(c.rule)); i < c.from || i > c.to {
				t.Errorf("%q at byte %d, want it between %d and %d", c.rule, i, c.from, c.to)
			}
		}
		if !bytes.Equal(body, demosite.BigRobotsTxt()) {
			t.Error("served robots.txt differs from BigRobotsTxt")
		}
	})
	t.Run("redirect loop across two hosts", func(t *testing.T) {
		a, b := site.Host(demosite.LoopA), site.Host(demosite.LoopB)
		resp := status(t, demosite.LoopA, "/loop/0", 301)
		if want := "http://" + b.Host + "/loop/0"; resp.Location != want {
			t.Errorf("loop-a redirects to %q, want %q", resp.Location, want)
		}
		resp = status(t, demosite.LoopB, "/loop/0", 301)
		if want := "http://" + a.Host + "/loop/0"; resp.Location != want {
			t.Errorf("loop-b redirects to %q, want %q", resp.Location, want)
		}
		if len(b.URLs) != 0 || len(a.URLs) != 2 {
			t.Errorf("loop-a has %d urls, loop-b %d; want 2 and none (loop-b is reached by redirects)", len(a.URLs), len(b.URLs))
		}
	})
	t.Run("Retry-After beyond any GiveUpAfter", func(t *testing.T) {
		status(t, demosite.RetryAfterBeyond, "/robots.txt", 404)
		resp := status(t, demosite.RetryAfterBeyond, "/page/0", 429)
		if !resp.RetryAfterSet || resp.RetryAfter <= 7*24*time.Hour {
			t.Errorf("Retry-After %v, want more than 7 days (the largest GiveUpAfter)", resp.RetryAfter)
		}
	})
	t.Run("nxdomain", func(t *testing.T) {
		failure(t, demosite.NXDomain, "/page/0", fetch.KindDNS, "no such host")
		if _, ok := site.Resolve()[site.Host(demosite.NXDomain).Name]; ok {
			t.Error("the unresolvable name is in the resolve table")
		}
	})

	// The servers logged what they saw, under the URLs' host names.
	seen := map[string]map[string]int{}
	for _, r := range site.Requests() {
		if seen[r.Host] == nil {
			seen[r.Host] = map[string]int{}
		}
		seen[r.Host][r.Path]++
		if r.End.Before(r.Start) {
			t.Errorf("%s%s ended before it started", r.Host, r.Path)
		}
	}
	for _, c := range []struct {
		kind demosite.Kind
		path string
		n    int
	}{
		{demosite.Refused, "/robots.txt", 0},
		{demosite.Hang, "/robots.txt", 1},
		{demosite.Drip, "/page/0", 1},
		{demosite.Reset, "/page/0", 1},
		{demosite.Robots503, "/robots.txt", 2},
		{demosite.Robots429, "/robots.txt", 3},
		{demosite.LoopB, "/loop/0", 1},
	} {
		if got := seen[site.Host(c.kind).Host][c.path]; got != c.n {
			t.Errorf("%s saw %d requests for %s, want %d (log %v)", c.kind, got, c.path, c.n, seen)
		}
	}
}

// TestHostileExpect: each host's expected ending accepts what a correct
// downloader gives and refuses what a broken one would.
func TestHostileExpect(t *testing.T) {
	site, _ := startHostile(t)
	url := func(k demosite.Kind, path string) string { return "http://" + site.Host(k).Host + path }
	big := site.Host(demosite.BigRobots)
	tests := []struct {
		name string
		kind demosite.Kind
		r    result.Result
		ok   bool
	}{
		{"refused ends denied by robots.txt", demosite.Refused, result.Result{URL: url(demosite.Refused, "/page/0"), Status: result.StatusDenied, Error: "robots.txt unreachable for 20s"}, true},
		{"refused as fetch_error is wrong", demosite.Refused, result.Result{URL: url(demosite.Refused, "/page/0"), Status: result.StatusFetchError, Error: "connection refused"}, false},
		{"hang denied", demosite.Hang, result.Result{Status: result.StatusDenied, Error: "robots.txt: timeout"}, true},
		{"robots 503 denied", demosite.Robots503, result.Result{Status: result.StatusDenied, Error: "robots.txt answered 503"}, true},
		{"robots 503 fetched is wrong", demosite.Robots503, result.Result{Status: result.StatusFetched}, false},
		{"drip fetch_error", demosite.Drip, result.Result{Status: result.StatusFetchError, Error: "timeout"}, true},
		{"reset fetch_error", demosite.Reset, result.Result{Status: result.StatusFetchError, Error: "connection reset"}, true},
		{"reset fetched is wrong", demosite.Reset, result.Result{Status: result.StatusFetched}, false},
		{"429 beyond fetch_error", demosite.RetryAfterBeyond, result.Result{Status: result.StatusFetchError, Error: "server answered 429"}, true},
		{"429 beyond denied is wrong", demosite.RetryAfterBeyond, result.Result{Status: result.StatusDenied, Error: "429"}, false},
		{"nxdomain once", demosite.NXDomain, result.Result{Status: result.StatusFetchError, Error: "lookup x: no such host", Attempts: 1}, true},
		{"nxdomain ended by another URL's lookup", demosite.NXDomain, result.Result{Status: result.StatusFetchError, Error: "not requested: host name x does not resolve: no such host"}, true},
		{"nxdomain retried is wrong", demosite.NXDomain, result.Result{Status: result.StatusFetchError, Error: "no such host", Attempts: 2}, false},
		{"robots 429 fetched with its page", demosite.Robots429, result.Result{URL: url(demosite.Robots429, "/page/1"), Status: result.StatusFetched,
			Data: demosite.Body(site.Host(demosite.Robots429).Host, "/page/1")}, true},
		{"robots 429 wrong body", demosite.Robots429, result.Result{URL: url(demosite.Robots429, "/page/1"), Status: result.StatusFetched, Data: "x"}, false},
		{"robots 429 given up is wrong", demosite.Robots429, result.Result{URL: url(demosite.Robots429, "/page/1"), Status: result.StatusDenied, Error: "robots.txt"}, false},
		{"big robots early-a denied", demosite.BigRobots, result.Result{URL: url(demosite.BigRobots, "/early-a/0"), Status: result.StatusDenied, Error: "disallowed by robots.txt"}, true},
		{"big robots early-b fetched is wrong", demosite.BigRobots, result.Result{URL: url(demosite.BigRobots, "/early-b/0"), Status: result.StatusFetched}, false},
		{"big robots late denied", demosite.BigRobots, result.Result{URL: url(demosite.BigRobots, "/late/0"), Status: result.StatusDenied, Error: "disallowed by robots.txt"}, true},
		{"big robots late fetched", demosite.BigRobots, result.Result{URL: url(demosite.BigRobots, "/late/0"), Status: result.StatusFetched}, true},
		{"big robots page fetched", demosite.BigRobots, result.Result{URL: url(demosite.BigRobots, "/page/0"), Status: result.StatusFetched, Data: demosite.Body(big.Host, "/page/0")}, true},
		{"loop redirect", demosite.LoopA, result.Result{Status: result.StatusRedirect}, true},
		{"loop ends too many redirects", demosite.LoopB, result.Result{Status: result.StatusFetchError, Error: "more than 5 redirects"}, true},
		{"loop timeout is wrong", demosite.LoopB, result.Result{Status: result.StatusFetchError, Error: "timeout"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := site.Host(tc.kind).Expect(tc.r)
			if (msg == "") != tc.ok {
				t.Errorf("Expect(%+v) = %q, want ok=%v", tc.r, msg, tc.ok)
			}
		})
	}
}

// TestHostileNeverRequested: the paths each host must never see.
func TestHostileNeverRequested(t *testing.T) {
	site, _ := startHostile(t)
	for _, c := range []struct {
		kind  demosite.Kind
		path  string
		never bool
	}{
		{demosite.Hang, "/robots.txt", false},
		{demosite.Hang, "/page/0", true},
		{demosite.Robots503, "/page/0", true},
		{demosite.BigRobots, "/early-a/0", true},
		{demosite.BigRobots, "/early-b/1", true},
		{demosite.BigRobots, "/late/0", false},
		{demosite.BigRobots, "/page/0", false},
		{demosite.Drip, "/page/0", false},
	} {
		if got := site.Host(c.kind).NeverRequested(c.path); got != c.never {
			t.Errorf("%s NeverRequested(%s) = %v, want %v", c.kind, c.path, got, c.never)
		}
	}
}
