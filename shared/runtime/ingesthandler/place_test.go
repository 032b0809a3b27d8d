package ingesthandler_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

var (
	sharedAddr = netip.MustParseAddr("127.0.0.9")
	cdnAddr    = netip.MustParseAddr("127.0.0.50")
	cdnRange   = netip.MustParsePrefix("127.0.0.48/28")
)

func messages(t *testing.T, hosts ...string) []urlmsg.Message {
	t.Helper()
	var out []urlmsg.Message
	for i, h := range hosts {
		m, err := urlmsg.Validate(urlmsg.Input{URL: "http://" + h + "/page"})
		if err != nil {
			t.Fatal(err)
		}
		m.ID = urlmsg.MakeID("place", i, m.URL)
		out = append(out, m)
	}
	return out
}

func shardOf(t *testing.T, s *sqlite.Store, key string) int {
	t.Helper()
	h, err := s.Load(t.Context(), key, 0)
	if err != nil {
		t.Fatalf("load %s: %v", key, err)
	}
	return h.VirtualShard
}

// TestIngestPlacesByAddress: ingest resolves a batch's hosts and places
// them in the shard of their server's address, so the 20 names of one
// server share one virtual shard (hashed by name they spread over most of
// the 16); a name that does not resolve, and one in an exempt range, is
// placed by name; the wake-up goes to the shards the hosts were placed in.
func TestIngestPlacesByAddress(t *testing.T) {
	srv, err := demosite.StartDNSBy(func(name string) netip.Addr {
		switch {
		case strings.HasSuffix(name, ".shared.test"):
			return sharedAddr
		case strings.HasSuffix(name, ".cdn.test"):
			return cdnAddr
		}
		return netip.Addr{}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	store, err := sqlite.NewMemory(time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h := newHandler(&hostqueue.Ingester{Store: store, Publisher: nopPublisher{}, Now: time.Now}, nil)
	h.Resolver = fetch.NewDNSCache(fetch.DNSCacheOptions{Servers: []string{srv.Addr()}})
	// ServerExempt is read live, as every parameter: the CDN's range is
	// placed by name.
	exempt, err := params.ParseExempt(cdnRange.String())
	if err != nil {
		t.Fatal(err)
	}
	h.Params = func(context.Context) params.Params {
		p := testParams()
		p.ServerExempt = exempt
		return p
	}
	w := &fakeWaker{}
	h.Waker = w

	var shared []string
	for i := range 20 {
		shared = append(shared, fmt.Sprintf("site%02d.shared.test", i))
	}
	hosts := append(slices.Clone(shared), "a.cdn.test", "b.cdn.test", "gone.nx.test", "127.0.0.9:8080")
	res := h.Ingest(t.Context(), messages(t, hosts...))
	if len(res.Failed) != 0 || res.Appended != len(hosts) {
		t.Fatalf("ingest = %+v, want every URL queued", res)
	}
	want := hostqueue.PlaceShard("", sharedAddr, true)
	byName := map[int]bool{}
	for _, k := range shared {
		if got := shardOf(t, store, k); got != want {
			t.Errorf("%s: shard %d, want its server's %d", k, got, want)
		}
		byName[hostqueue.VirtualShard(k)] = true
	}
	if len(byName) < 4 {
		t.Errorf("hashed by name the 20 hosts would share %d shards: the test shows nothing", len(byName))
	}
	if got := shardOf(t, store, "127.0.0.9:8080"); got != want {
		t.Errorf("the server's address as a host: shard %d, want %d", got, want)
	}
	for _, k := range []string{"a.cdn.test", "b.cdn.test", "gone.nx.test"} {
		if got := shardOf(t, store, k); got != hostqueue.VirtualShard(k) {
			t.Errorf("%s (exempt or unresolved): shard %d, want its name's %d", k, got, hostqueue.VirtualShard(k))
		}
	}
	if len(w.calls) != 1 || !slices.Contains(w.calls[0], want) {
		t.Errorf("wake-ups %v, want one naming shard %d", w.calls, want)
	}
}

// TestIngestPlaceBudget: lookups that outlast the budget (a nameserver
// that never answers) place their hosts by name, and the batch is queued.
func TestIngestPlaceBudget(t *testing.T) {
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	store, err := sqlite.NewMemory(time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var log bytes.Buffer
	h := newHandler(&hostqueue.Ingester{Store: store, Publisher: nopPublisher{}, Now: time.Now}, &log)
	h.Resolver = fetch.NewDNSCache(fetch.DNSCacheOptions{Servers: []string{silent.LocalAddr().String()}, Timeout: time.Minute})
	h.PlaceBudget = 100 * time.Millisecond
	hosts := []string{"one.slow.test", "two.slow.test", "three.slow.test"}
	res := h.Ingest(t.Context(), messages(t, hosts...))
	if len(res.Failed) != 0 || res.Appended != len(hosts) {
		t.Fatalf("ingest = %+v, want every URL queued", res)
	}
	for _, k := range hosts {
		if got := shardOf(t, store, k); got != hostqueue.VirtualShard(k) {
			t.Errorf("%s: shard %d, want its name's %d", k, got, hostqueue.VirtualShard(k))
		}
	}
	if !strings.Contains(log.String(), "ran out of the batch's budget") || !strings.Contains(log.String(), `"hosts":3`) {
		t.Errorf("log %q, want a warning that 3 hosts were placed by name", log.String())
	}
}
