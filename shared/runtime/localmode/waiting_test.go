package localmode

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestProgressWaiting: while hosts wait, Progress says why and how long: a
// host that answered 429 with Retry-After is held back until the pause
// ends, and one whose robots.txt asks for a Crawl-delay shows that delay
// (once its worker committed a round: the state is where they are read).
func TestProgressWaiting(t *testing.T) {
	t.Parallel()
	busy := startSite(t, demosite.Options{Hosts: 1, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "40")
		w.WriteHeader(http.StatusTooManyRequests)
	})})
	slow := startSite(t, demosite.Options{Hosts: 1, FirstIP: 20, Robots: "User-agent: *\nCrawl-delay: 0.5\n"})
	urls := append(busy.URLs(2), slow.URLs(25)...)
	in := writeLines(t, jsonLines(urls))
	dir := t.TempDir()
	rt := open(t, Options{State: filepath.Join(dir, "state.db"), OutPath: filepath.Join(dir, "out.jsonl"), Addresses: fetch.PrivatePolicy(), ShardCount: 2,
		Params: map[string]string{"FetchDelay": "100ms"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := rt.Run(ctx, RunOptions{Input: fileInput(t, in)})
		done <- err
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	var paused, crawl Wait
	// The limit only bounds a hang.
	for end := time.Now().Add(time.Minute); time.Now().Before(end) && (paused.Hosts == 0 || crawl.Hosts == 0); time.Sleep(100 * time.Millisecond) {
		for _, w := range rt.Progress().Waiting {
			switch w.Reason {
			case WaitPaused:
				paused = w
			case WaitCrawlDelay:
				crawl = w
			}
		}
	}
	if paused.Hosts != 1 || paused.Until.Before(start.Add(30*time.Second)) {
		t.Errorf("Retry-After host: %+v, want 1 host held back about 40s", paused)
	}
	if crawl.Hosts != 1 || crawl.Delay != 500*time.Millisecond {
		t.Errorf("Crawl-delay host: %+v, want 1 host at 500ms", crawl)
	}
}
