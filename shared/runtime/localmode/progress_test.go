package localmode

import (
	"context"
	"io"
	"path/filepath"
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
		{"one host", []HostLoad{{"a.test", 12, time.Second}}, 12 * time.Second, "a.test"},
		// 12 URLs and a Crawl-delay of 4 s on one host outweigh 30 URLs at
		// 1 s elsewhere: the "said 2 s, took 40 s".
		{"crawl-delay wins", []HostLoad{{"a.test", 30, time.Second}, {"slow.test", 10, 4 * time.Second}, {"b.test", 2, time.Second}},
			40 * time.Second, "slow.test"},
		{"many small hosts", []HostLoad{{"a.test", 1, time.Second}, {"b.test", 1, time.Second}, {"c.test", 3, 250 * time.Millisecond}},
			time.Second, "a.test"},
		{"empty queues", []HostLoad{{"a.test", 0, time.Second}}, 0, ""},
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
