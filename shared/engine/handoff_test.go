package engine_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// publishLog records each Publish call: when, and which URLs.
type publishLog struct {
	mu    sync.Mutex
	calls []publishCall
}

type publishCall struct {
	at   time.Time
	urls []string
}

func (l *publishLog) record(rs []result.Result) {
	c := publishCall{at: time.Now()}
	for _, r := range rs {
		c.urls = append(c.urls, r.URL)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

// when returns when url's result was handed to the publisher.
func (l *publishLog) when(url string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.calls {
		for _, u := range c.urls {
			if u == url {
				return c.at, true
			}
		}
	}
	return time.Time{}, false
}

// TestResultsHandedOverAsFetched: a large body goes to the publisher as
// soon as it is fetched, before the host's next request, so a worker never
// holds a round of bodies; the URLs still leave the queue only after.
func TestResultsHandedOverAsFetched(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.MaxBodyBytes = 200 << 10
		e := newEnv(t, p)
		body := strings.Repeat("x", 150<<10)
		s := newSite(t, withRobots(404, "", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, body)
		}))
		var urls []string
		for i := range 4 {
			urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
		}
		e.seed(urls...)
		var log publishLog
		eng := e.engine()
		eng.Publisher = hookPublisher{next: e.pub, before: log.record}
		e.runWith(eng, "owner-"+t.Name(), 20*time.Second, 0, e.pub.has(len(urls)))

		checkFetched(t, e.pub, urls...)
		reqs := s.requests() // robots.txt, then the pages in order
		if len(reqs) != len(urls)+1 {
			t.Fatalf("the site saw %d requests, want robots.txt and %d pages", len(reqs), len(urls))
		}
		for i, u := range urls[:len(urls)-1] {
			at, ok := log.when(u)
			next := reqs[i+2]
			if !ok || !at.Before(next.Start) {
				t.Errorf("%s handed over at %v, not before the next request (%s at %v): held back", u, at.Format("15:04:05.000"), next.Path, next.Start.Format("15:04:05.000"))
			}
		}
		for _, c := range log.calls {
			if len(c.urls) != 1 {
				t.Errorf("a publish of %d large results at once, want one at a time: %v", len(c.urls), c.urls)
			}
		}
	})
}

// TestSmallResultsShareABatch: small results of a lone host still go out
// ten to a publish, one SQS request per ten URLs, as a whole round did.
func TestSmallResultsShareABatch(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.FetchDelay = 20 * time.Millisecond
		e := newEnv(t, p)
		s := newSite(t, withRobots(404, "", page))
		var urls []string
		for i := range 20 {
			urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
		}
		e.seed(urls...)
		var log publishLog
		eng := e.engine()
		eng.Publisher = hookPublisher{next: e.pub, before: log.record}
		e.runWith(eng, "owner-"+t.Name(), 20*time.Second, 0, e.pub.has(len(urls)))

		checkFetched(t, e.pub, urls...)
		var sizes []int
		for _, c := range log.calls {
			sizes = append(sizes, len(c.urls))
		}
		if len(sizes) != 2 || sizes[0] != 10 || sizes[1] != 10 {
			t.Errorf("published in calls of %v results, want two of 10", sizes)
		}
	})
}
