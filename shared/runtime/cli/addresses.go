package cli

// The address policy of both backends: --allow-net and --allow-private
// become one fetch.AddressPolicy, whose denials name these flags, and the
// end of a run says which flag would have allowed the URLs it denied.

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// localRemedy names local mode's flags in address denials.
var localRemedy = fetch.Remedy{Where: "local mode", Network: "--allow-net %s", Private: "--allow-private"}

// loopback is what the demo site needs: it lives on loopback addresses.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

var (
	AllowNet     NetworksFlag
	AllowPrivate = flag.Bool("allow-private", false, "open loopback and the private networks (127.0.0.0/8, ::1, RFC 1918, CGNAT 100.64.0.0/10, fc00::/7) on every port; never link-local or a cloud metadata address (those open only when named in --allow-net)")
)

func init() {
	flag.Var(&AllowNet, "allow-net", "open these networks, `CIDR[:PORT[-PORT]]`[,...], repeatable (e.g. 127.0.0.0/8 for a site on this machine); "+
		"a network without ports is open on EVERY port, so a page or a redirect there may reach any service on it (a database, an admin console): "+
		"name the ports to open only those (127.0.0.0/8:8080, 10.0.0.0/8:8000-8099, [::1]:8080); "+
		"link-local and the cloud metadata addresses (169.254.169.254, fd00:ec2::254, ...) open only when named exactly (169.254.169.254/32); default: public addresses only")
}

// NetworksFlag is --allow-net: networks in CIDR notation, each on every
// port or on the ports named after it (fetch.ParseNetworkPorts),
// comma-separated, the flag repeatable. A bad item fails the flag, and
// the flag package names the flag and the value in the usage error.
type NetworksFlag []fetch.Network

func (n *NetworksFlag) String() string {
	if n == nil {
		return ""
	}
	s := make([]string, len(*n))
	for i, p := range *n {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (n *NetworksFlag) Set(v string) error {
	nets, err := fetch.ParseNetworkPorts(v)
	if err != nil {
		return err
	}
	if len(nets) == 0 {
		return fmt.Errorf("no network in %q: want CIDR[:PORT[-PORT]][,...], e.g. 127.0.0.0/8 or 127.0.0.0/8:8080", v)
	}
	*n = append(*n, nets...)
	return nil
}

// AddressPolicy is what the flags open: --allow-net's networks (on their
// ports), the private set with --allow-private, and loopback for the demo
// site.
func AddressPolicy(nets []fetch.Network, private, demo bool) fetch.AddressPolicy {
	p := fetch.AddressPolicy{}.OpenNetworks(nets...).WithRemedy(localRemedy)
	if private {
		p = p.OpenPrivate()
	}
	if demo {
		p = p.Open(loopback...)
	}
	return p
}

// AddressDenials counts the results the address policy denied, by the
// flag that would have allowed them, for the end of the run. Safe for
// concurrent use.
type AddressDenials struct {
	mu      sync.Mutex
	byFix   map[string]int
	example map[string]string
}

func (d *AddressDenials) Add(r result.Result) {
	if r.Status != result.StatusDenied {
		return
	}
	fix := strings.TrimPrefix(fetch.AddressFix(r.Error), localRemedy.Where+": ")
	if fix == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byFix == nil {
		d.byFix, d.example = map[string]int{}, map[string]string{}
	}
	if d.byFix[fix]++; d.byFix[fix] == 1 {
		d.example[fix] = r.URL
	}
}

// maxFixes bounds the lines print writes: a list of many networks says
// the most common ones and how many more.
const maxFixes = 5

// print says, when the policy denied any URL, which flag would have
// allowed them, the most common first.
func (d *AddressDenials) Print(w io.Writer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	total := 0
	for _, n := range d.byFix {
		total += n
	}
	if total == 0 {
		return
	}
	fixes := slices.SortedFunc(maps.Keys(d.byFix), func(a, b string) int {
		return cmp.Or(d.byFix[b]-d.byFix[a], strings.Compare(a, b))
	})
	fmt.Fprintf(w, "urldownloader: %d urls were denied by the address policy; to allow them, run again with:\n", total)
	for _, fix := range fixes[:min(len(fixes), maxFixes)] {
		n := d.byFix[fix]
		fmt.Fprintf(w, "urldownloader:   %s  (%d %s, e.g. %s)\n", fix, n, map[bool]string{true: "url", false: "urls"}[n == 1], d.example[fix])
	}
	if len(fixes) > maxFixes {
		fmt.Fprintf(w, "urldownloader:   ... and %d other networks (see the results' errors)\n", len(fixes)-maxFixes)
	}
	// The denials are results: this state is done with those URLs.
	fmt.Fprintln(w, "urldownloader:   and a new --state (their denied results are written; add --overwrite to replace --out, or give another --out)")
}
