package cli

import (
	"flag"
	"fmt"
	"io"
	"sync"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

var (
	DemoLarge = flag.Bool("demo-large", false, "demo site: add large pages (1 MB, 5 MB, 20 MB, and one 1 MB body on two hosts) beside the small ones, so results show both bodies inline and bodies stored by content (in --bodies, or in the emulated stack's bucket); sets MaxBodyBytes=64MiB FetchTimeout=30s unless given")
)

// LargeDefaults let the large pages through whole: the default
// MaxBodyBytes (10 MiB) would cut the 20 MB one, and 30 s leaves it time
// on a loaded machine. A --param the user gave wins.
var LargeDefaults = map[string]string{
	"MaxBodyBytes": "67108864",
	"FetchTimeout": "30s",
}

// LargeURLs are the large pages of a --demo-large run on the site's hosts.
func LargeURLs(hosts []string) []string {
	at := func(i int) string { return hosts[i%len(hosts)] }
	return []string{
		demosite.LargeURL(at(0), 1_000_000, 1),
		demosite.LargeURL(at(1), 1_000_000, 1), // the same body: stored once
		demosite.LargeURL(at(1), 5_000_000, 2),
		demosite.LargeURL(at(2), 20_000_000, 3),
	}
}

// BodyTally counts how results carried their bodies.
type BodyTally struct {
	mu             sync.Mutex
	inline, stored int
	storedBytes    int64
	objects        map[string]int64
}

func (b *BodyTally) Add(r result.Result) {
	if r.Status != result.StatusFetched {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.Body == nil {
		b.inline++
		return
	}
	if b.objects == nil {
		b.objects = map[string]int64{}
	}
	b.stored++
	b.storedBytes += r.Body.Bytes
	where := r.Body.Path
	if where == "" {
		where = "s3://" + r.Body.Bucket + "/" + r.Body.Key
	}
	b.objects[where] = r.Body.Bytes
}

func (b *BodyTally) Print(w io.Writer, where string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inline+b.stored == 0 {
		return // nothing fetched: nothing to say
	}
	var kept int64
	for _, n := range b.objects {
		kept += n
	}
	fmt.Fprintf(w, "urldownloader: bodies: %d inline, %d stored (%.1f MB) as %d objects (%.1f MB) in %s\n",
		b.inline, b.stored, float64(b.storedBytes)/1e6, len(b.objects), float64(kept)/1e6, where)
}
