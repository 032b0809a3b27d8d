package wiring

import (
	"net/netip"
	"testing"

	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
)

// Hosts behind a CDN's address are placed by name by ingest and the
// engine alike: one Cloudflare address must not pull every site it fronts
// into one shard.
func TestPlacementExemptsCDNs(t *testing.T) {
	p := Parts{Resolver: tableResolver{}}
	cf := netip.MustParseAddr("104.16.1.1")
	covered := func(list []netip.Prefix) bool {
		for _, r := range list {
			if r.Contains(cf) {
				return true
			}
		}
		return false
	}
	if e := p.Engine(); e.Placement == nil || !covered(e.Placement.Exempt) {
		t.Errorf("the engine places %s by address, want by name (ServerExempt's default)", cf)
	}
	if h := p.IngestHandler(nil); !covered(h.Exempt) {
		t.Errorf("ingest places %s by address, want by name (ServerExempt's default)", cf)
	}
	var _ ingesthandler.Resolver = tableResolver{}
}
