package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// HostileDefaults shape a --demo-hostile run so it ends in about
// GiveUpAfter: short requests, a back-off capped well below the bound (a
// failing host is probed often enough to be given up soon after it), and
// a short recheck period. A --param the user gave wins.
var HostileDefaults = map[string]string{
	"GiveUpAfter":     "20s",
	"FetchTimeout":    "2s",
	"MaxBackoff":      "4s",
	"CheckHostPeriod": "2s",
}

// HostileTally follows how each hostile host's URLs end, as results arrive.
type HostileTally struct {
	site *demosite.HostileSite
	// acceptedAt says when ingest accepted a host's URLs (the pipeline's).
	acceptedAt func(host string) (time.Time, bool)

	mu sync.Mutex
	// root is, for a redirect target, the host whose submitted URL began
	// its chain: loop-b's URLs are accepted as loop-a's.
	root  map[string]string
	hosts map[string]*hostEnding
}

type hostEnding struct {
	byStatus   map[result.Status]int
	firstError string
	accepted   time.Time
	last       time.Time
	unexpected []string
}

func NewHostileTally(site *demosite.HostileSite, acceptedAt func(string) (time.Time, bool)) *HostileTally {
	return &HostileTally{site: site, acceptedAt: acceptedAt, root: map[string]string{}, hosts: map[string]*hostEnding{}}
}

// add takes one result (every result of the run passes; others are skipped).
func (t *HostileTally) Add(r result.Result) {
	h, ok := t.site.ByHost(r.Host)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	root, ok := t.root[r.ID]
	if !ok {
		root = r.Host
	}
	if r.Status == result.StatusRedirect && r.Location != "" {
		t.root[urlmsg.MakeID(r.ID, 0, r.Location)] = root
	}
	e := t.hosts[r.Host]
	if e == nil {
		e = &hostEnding{byStatus: map[result.Status]int{}}
		t.hosts[r.Host] = e
	}
	e.byStatus[r.Status]++
	if e.firstError == "" {
		e.firstError = r.Error
	}
	if at, ok := t.acceptedAt(root); ok && (e.accepted.IsZero() || at.Before(e.accepted)) {
		e.accepted = at
	}
	e.last = time.Now()
	if msg := h.Expect(r); msg != "" {
		e.unexpected = append(e.unexpected, msg)
	}
}

// print writes, per hostile host, how its URLs ended: its kind, counts by
// status, the time from acceptance to its last result, the requests it
// saw, whether that is the ending its kind documents, and the first error.
func (t *HostileTally) Print(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	reqs := map[string]int{}
	for _, r := range t.site.Requests() {
		reqs[r.Host]++
	}
	fmt.Fprintf(w, "urldownloader: hostile hosts: how each ended (time from acceptance to its last result, requests the host saw):\n")
	for _, h := range t.site.Hosts() {
		e := t.hosts[h.Host]
		if e == nil {
			verdict := "no result yet"
			if len(h.URLs) == 0 {
				verdict = "no url reached it"
			}
			fmt.Fprintf(w, "urldownloader:   %-19s %-38s %s; requests=%d\n", h.Kind, h.Host, verdict, reqs[h.Host])
			continue
		}
		var counts []string
		for _, s := range slices.Sorted(maps.Keys(e.byStatus)) {
			counts = append(counts, fmt.Sprintf("%s=%d", s, e.byStatus[s]))
		}
		took := "?"
		if !e.accepted.IsZero() {
			took = e.last.Sub(e.accepted).Round(100 * time.Millisecond).String()
		}
		verdict := "as expected: " + h.Kind.Ending()
		if len(e.unexpected) > 0 {
			verdict = fmt.Sprintf("UNEXPECTED (%d): %s; want %s", len(e.unexpected), clip(e.unexpected[0], 160), h.Kind.Ending())
		}
		fmt.Fprintf(w, "urldownloader:   %-19s %-38s %-28s after %-6s requests=%-3d %s\n",
			h.Kind, h.Host, strings.Join(counts, " "), took, reqs[h.Host], verdict)
		if e.firstError != "" {
			fmt.Fprintf(w, "urldownloader:   %-19s first error: %s\n", "", clip(e.firstError, 200))
		}
	}
}

// unexpected counts the results that did not end as their host's kind says.
func (t *HostileTally) Unexpected() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.hosts {
		n += len(e.unexpected)
	}
	return n
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
