package engine_test

import (
	"context"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/engine"
)

// answers is a resolver that answers every name with addr: the DNS of the
// test's hosts, which it changes.
type answers struct{ addr netip.Addr }

func (a answers) Lookup(context.Context, string) ([]netip.Addr, error) {
	return []netip.Addr{a.addr}, nil
}

// TestMoveOnDNSChange: a host stored in the shard of its old address,
// whose name now resolves to an address placed in another shard, is not
// fetched by the invocation of the old shard: that invocation moves it,
// and the new shard's fetches it, once. Without Placement (local mode) it
// is fetched where it is stored.
func TestMoveOnDNSChange(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		s := newSite(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		u := s.url("/page")
		m, err := urlmsg.Validate(urlmsg.Input{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		key := m.Host
		oldAddr, newAddr := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
		from, to := hostqueue.PlaceShard(key, oldAddr, true), hostqueue.PlaceShard(key, newAddr, true)
		for a := 3; from == to; a++ {
			newAddr = netip.AddrFrom4([4]byte{192, 0, 2, byte(a)})
			to = hostqueue.PlaceShard(key, newAddr, true)
		}
		_, err = e.store.Append(t.Context(), hostqueue.AppendRequest{Key: key, Limit: 10, Due: time.Now(), Shard: from, Placed: true,
			Entries: []hostqueue.Entry{{ID: "p1", URL: m.URL}}})
		if err != nil {
			t.Fatal(err)
		}
		run := func(shard int) engine.Summary {
			eng := e.engine()
			eng.Placement = &engine.Placement{Resolver: answers{newAddr}}
			return e.runRequest(eng, engine.RunRequest{Shard: shard, ShardCount: hostqueue.VirtualShards,
				Owner: "owner-" + t.Name(), Until: time.Now().Add(3 * time.Second), Tick: 250 * time.Millisecond})
		}
		run(from)
		if n := len(s.requests()); n != 0 {
			t.Errorf("the old shard's invocation made %d requests, want none", n)
		}
		if h := e.load(key); h == nil || h.VirtualShard != to || h.Pending != 1 || h.Due.IsZero() {
			t.Fatalf("after the old shard's run: %+v, want the host queued and due in shard %d", h, to)
		}
		run(to)
		e.pub.one(t, u)
		if n := s.count("/page"); n != 1 {
			t.Errorf("%d requests of the page, want 1, from the new shard's invocation", n)
		}
	})
}
