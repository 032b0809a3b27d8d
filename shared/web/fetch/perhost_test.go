package fetch_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestConnsPerHost: a caller with several requests in flight to one host
// (a HostRules rule's connections) gets them to the host at once, each on
// a connection of its own, and those connections wait idle for its next
// requests: a second wave dials nothing.
func TestConnsPerHost(t *testing.T) {
	const n = 4
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	together := 0
	c, port := countingServer(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if arrived++; arrived%n == 0 {
			close(all)
		}
		wave := all
		mu.Unlock()
		// The bound only ends a hang: requests queued in the transport
		// would never all arrive.
		select {
		case <-wave:
			mu.Lock()
			together++
			mu.Unlock()
		case <-time.After(10 * time.Second):
		}
	})
	f := fetch.New(localOptions(), fixedNow)
	defer f.CloseIdleConnections()
	u := "http://127.0.0.2:" + port + "/"
	for round := range 2 {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				resp, err := f.Fetch(context.Background(), fetch.Request{URL: u})
				if err != nil || string(resp.Body) != "ok" {
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		wg.Wait()
		mu.Lock()
		all = make(chan struct{})
		mu.Unlock()
	}
	opened, _, served := c.get()
	want(t, "requests served", served, 2*n)
	want(t, "requests in flight together", together, 2*n)
	want(t, "connections opened", opened, n)
	if fetch.MaxConnsPerHost < n {
		t.Errorf("MaxConnsPerHost %d, below the %d this test needs", fetch.MaxConnsPerHost, n)
	}
}
