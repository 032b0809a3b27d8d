package localmode

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// The politeness bound (the ETA and the summary's yardstick) is the
// slowest queue's URLs × its delay, FetchDelay or a longer Crawl-delay.
func TestBound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts []HostLoad
		want  time.Duration
		worst string
	}{
		{"none", nil, 0, ""},
		{"one host", []HostLoad{{Key: "a.test", URLs: 12, Delay: time.Second}}, 12 * time.Second, "a.test"},
		// 12 URLs and a Crawl-delay of 4 s on one host outweigh 30 URLs at
		// 1 s elsewhere: the "said 2 s, took 40 s".
		{"crawl-delay wins", []HostLoad{{Key: "a.test", URLs: 30, Delay: time.Second}, {Key: "slow.test", URLs: 10, Delay: 4 * time.Second}, {Key: "b.test", URLs: 2, Delay: time.Second}},
			40 * time.Second, "slow.test"},
		{"many small hosts", []HostLoad{{Key: "a.test", URLs: 1, Delay: time.Second}, {Key: "b.test", URLs: 1, Delay: time.Second}, {Key: "c.test", URLs: 3, Delay: 250 * time.Millisecond}},
			time.Second, "a.test"},
		// 100,000 copies of one URL are one fetch, not 100,000 delays.
		{"copies share a fetch", []HostLoad{{Key: "same.test", URLs: 100000, Copies: 99999, Delay: time.Second}, {Key: "b.test", URLs: 3, Delay: time.Second}},
			3 * time.Second, "b.test"},
		{"empty queues", []HostLoad{{Key: "a.test", URLs: 0, Delay: time.Second}}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, worst := Bound(tc.hosts)
			if got != tc.want || worst.Key != tc.worst {
				t.Errorf("Bound = %s (%q), want %s (%q)", got, worst.Key, tc.want, tc.worst)
			}
		})
	}
}

// TestHostsLeft: while a run works a host whose robots.txt asks for a
// Crawl-delay, HostsLeft says its URLs still queued and that delay (not
// FetchDelay's), once robots.txt is read: the ETA's inputs.
func TestHostsLeft(t *testing.T) {
	site := startSite(t, demosite.Options{Hosts: 1, Robots: "User-agent: *\nCrawl-delay: 1\n"})
	in := writeLines(t, jsonLines(site.URLs(6))) // 6 s at the Crawl-delay
	rt := open(t, Options{State: filepath.Join(t.TempDir(), "s.db"), Out: io.Discard, Addresses: fetch.PrivatePolicy(),
		Params: map[string]string{"FetchDelay": "100ms"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := rt.Run(ctx, RunOptions{Input: fileInput(t, in)})
		done <- err
	}()
	host := site.Hosts()[0]
	var seen []HostLoad
	deadline := time.After(60 * time.Second) // bounds a hang only
	for {
		left, err := rt.HostsLeft(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 1 && left[0].Delay == time.Second {
			seen = left
			break
		}
		select {
		case <-deadline:
			t.Fatalf("no Crawl-delay in HostsLeft within 60 s; last %+v", left)
		case err := <-done:
			t.Fatalf("the run ended (%v) before HostsLeft showed the Crawl-delay", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	<-done
	if seen[0].Key != host || seen[0].URLs < 1 || seen[0].URLs > 6 {
		t.Errorf("HostsLeft = %+v, want %s with 1 to 6 urls", seen, host)
	}
	if d := rt.HostDelay(host); d != time.Second {
		t.Errorf("HostDelay(%s) = %s, want the Crawl-delay 1s", host, d)
	}
	if d := rt.HostDelay("other.test"); d != 100*time.Millisecond {
		t.Errorf("HostDelay of a host never seen = %s, want FetchDelay 100ms", d)
	}
}

// TestHostsLeftCountsHeldURLs: a host's URLs held back behind its full
// queue (PersistLimit) count in HostsLeft, so the ETA's bound is what the
// host has left, not what its queue holds.
func TestHostsLeftCountsHeldURLs(t *testing.T) {
	rt := open(t, Options{State: filepath.Join(t.TempDir(), "s.db"), Out: io.Discard,
		Params: map[string]string{"FetchDelay": "1s", "PersistLimit": "10"}})
	var lines []string
	for i := range 25 {
		lines = append(lines, fmt.Sprintf("http://big.test/%d", i))
	}
	if _, err := rt.feed(context.Background(), Input{Name: "t", R: strings.NewReader(strings.Join(lines, "\n"))}, make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	left, err := rt.HostsLeft(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].URLs != 25 {
		t.Fatalf("HostsLeft = %+v, want big.test with its 25 urls (10 queued, 15 held back)", left)
	}
	if bound, _ := Bound(left); bound != 25*time.Second {
		t.Errorf("Bound = %s, want 25s", bound)
	}
}

// TestHostsLeftCountsCopies: 500 copies of one URL queued on a host
// cost one fetch (the engine makes one for all of them), so HostsLeft
// counts them as one and the ETA's bound is set by a host with 3 distinct
// URLs, not 500 delays.
func TestHostsLeftCountsCopies(t *testing.T) {
	rt := open(t, Options{State: filepath.Join(t.TempDir(), "s.db"), Out: io.Discard, Params: map[string]string{"FetchDelay": "1s"}})
	var lines []string
	for range 500 {
		lines = append(lines, "http://same.test/x")
	}
	lines = append(lines, "http://same.test/y", "http://b.test/1", "http://b.test/2", "http://b.test/3")
	if _, err := rt.feed(context.Background(), Input{Name: "t", R: strings.NewReader(strings.Join(lines, "\n"))}, make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	left, err := rt.HostsLeft(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bound, worst := Bound(left)
	if bound != 3*time.Second || worst.Key != "b.test" {
		t.Errorf("Bound = %s (%+v), want 3s (b.test); loads %+v", bound, worst, left)
	}
	for _, h := range left {
		if h.Key == "same.test" && (h.URLs != 501 || h.Fetches() != 2) {
			t.Errorf("same.test: %d urls, %d fetches; want 501, 2", h.URLs, h.Fetches())
		}
	}
}
