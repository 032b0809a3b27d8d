package urlmsg

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// The host parser follows the WHATWG URL standard's host parser for special
// schemes (https://url.spec.whatwg.org/#host-parsing), because that is what
// the web's links are written for: browsers accept r3---sn-4g5e6nsz.
// googlevideo.com, foo-.blogspot.com and _dmarc.example.com, and read
// 0x7f.1 and 2130706433 as 127.0.0.1. Go's url.Parse has already split the
// authority and percent-decoded the host. Where this parser is stricter
// than the standard it says so, and why.

// Bounds a DNS name must keep, in bytes, without its trailing dot (RFC 1035
// §2.3.4). The standard does not check them (VerifyDnsLength=false), but a
// longer name can never be resolved, so it is refused here, at ingest, with
// a clear error rather than ending later as a fetch error; it also keeps a
// punycode label from growing on each normalisation.
const (
	maxLabelBytes = 63
	maxNameBytes  = 253
)

// hostProfile is UTS #46 processing as the standard's "domain to ASCII"
// uses it with beStrict false: nontransitional, CheckBidi, CheckJoiners,
// and neither CheckHyphens (so "--" in positions 3-4 and leading or
// trailing hyphens pass) nor UseSTD3ASCIIRules (so '_' passes, and other
// ASCII is left to the forbidden-code-point check). MapForLookup turns on
// the mapping and the label checks; the options after it override its
// hyphen and STD3 settings. Lengths are checked by parseHost.
var hostProfile = idna.New(
	idna.MapForLookup(),
	idna.Transitional(false),
	idna.BidiRule(),
	idna.CheckJoiners(true),
	idna.CheckHyphens(false),
	idna.StrictDomainName(false),
	idna.VerifyDNSLength(false),
)

// parseHost returns the canonical form of a host (no port, no brackets): a
// lowercase punycode DNS name without a trailing dot, a dotted-decimal IPv4
// address, or a bracketed, compressed, lowercase IPv6 address.
func parseHost(host string) (string, error) {
	if host == "" {
		return "", errors.New("host is empty")
	}
	// A ':' is a forbidden host code point, so a host with one can only be
	// an IPv6 address (url.Parse has taken the brackets off).
	if strings.Contains(host, ":") {
		a, err := parseIPv6(host)
		if err != nil {
			return "", err
		}
		return "[" + formatIPv6(a) + "]", nil
	}
	if !utf8.ValidString(host) {
		return "", fmt.Errorf("host %q is not a valid name or address", host)
	}
	ascii, err := hostProfile.ToASCII(host)
	if err != nil {
		return "", fmt.Errorf("host %q is not a valid name: %v", host, err)
	}
	ascii = strings.ToLower(ascii)
	// Checked after mapping: IDNA can turn a character into a forbidden
	// one (U+02D9 maps to " \u0307", U+FF05 to '%').
	if i := strings.IndexFunc(ascii, forbiddenDomainCodePoint); i >= 0 {
		r, _ := utf8.DecodeRuneInString(ascii[i:])
		return "", fmt.Errorf("host %q contains the forbidden code point %q", host, r)
	}
	// One trailing dot names the same host as none: drop it, so both
	// share one queue and one politeness budget.
	name := strings.TrimSuffix(ascii, ".")
	if name == "" {
		return "", errors.New("host is empty")
	}
	if endsInNumber(name) {
		a, err := parseIPv4(name)
		if err != nil {
			return "", fmt.Errorf("host %q is not a valid IPv4 address: %v", host, err)
		}
		return a.String(), nil
	}
	if err := checkDNSName(name); err != nil {
		return "", fmt.Errorf("host %q is not a valid name: %v", host, err)
	}
	return name, nil
}

// forbiddenDomainCodePoint is the standard's forbidden domain code point:
// the forbidden host code points, C0 controls, '%' and DEL.
func forbiddenDomainCodePoint(r rune) bool {
	switch r {
	case 0x00, '\t', '\n', '\r', ' ', '#', '/', ':', '<', '>', '?', '@', '[', '\\', ']', '^', '|', '%', 0x7f:
		return true
	}
	return r < 0x20
}

// checkDNSName checks a name that passed the standard's checks against what
// DNS can carry and a resolver looks up: labels of 1 to 63 bytes, at most
// 253 in all, made of letters, digits, '-' and '_' (the standard lets
// through other ASCII such as '!' or '*', which no resolver looks up).
func checkDNSName(name string) error {
	if len(name) > maxNameBytes {
		return fmt.Errorf("name is %d bytes, the limit is %d", len(name), maxNameBytes)
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return errors.New("it has an empty label")
		}
		if len(label) > maxLabelBytes {
			return fmt.Errorf("label %q is %d bytes, the limit is %d", clip(label, 20), len(label), maxLabelBytes)
		}
		if i := strings.IndexFunc(label, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}); i >= 0 {
			return fmt.Errorf("%q is not a letter, digit, '-' or '_'", label[i])
		}
	}
	return nil
}

// endsInNumber is the standard's "ends in a number" checker: a host whose
// last label is a number is an IPv4 address or invalid, never a name.
// name has no trailing dot.
func endsInNumber(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last != "" && strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, err := parseIPv4Number(last)
	return err == nil
}

// parseIPv4 is the standard's IPv4 parser: one to four dot-separated
// numbers, each decimal, octal (leading 0) or hex (0x), the last filling
// the bytes the others leave ("127.1" is 127.0.0.1, "2130706433" too).
// name has no trailing dot.
func parseIPv4(name string) (netip.Addr, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 4 {
		return netip.Addr{}, fmt.Errorf("%d parts, at most 4", len(parts))
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, err := parseIPv4Number(p)
		if err != nil {
			return netip.Addr{}, err
		}
		nums[i] = n
	}
	last := len(nums) - 1
	for _, n := range nums[:last] {
		if n > 255 {
			return netip.Addr{}, fmt.Errorf("part %s is over 255", formatPart(n))
		}
	}
	if limit := uint64(1) << (8 * (5 - len(nums))); nums[last] >= limit {
		return netip.Addr{}, fmt.Errorf("last part %s is over %d", formatPart(nums[last]), limit-1)
	}
	v := uint32(nums[last])
	for i, n := range nums[:last] {
		v += uint32(n) << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

// tooBig stands for any IPv4 number above 2^32, all of which are out of
// range, so the parser never overflows on a long run of digits.
const tooBig = 1 << 33

func formatPart(n uint64) string {
	if n >= tooBig {
		return "(beyond 2^32)"
	}
	return strconv.FormatUint(n, 10)
}

// parseIPv4Number is the standard's IPv4 number parser. A value above 2^32
// comes back as tooBig: still a number (the host is IPv4), but out of range.
func parseIPv4Number(s string) (uint64, error) {
	if s == "" {
		return 0, errors.New("empty part")
	}
	orig, radix := s, uint64(10)
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, radix = s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, radix = s[1:], 8
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		d := uint64(radix)
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		}
		if d >= radix {
			return 0, fmt.Errorf("part %q is not a base-%d number", clip(orig, 20), radix)
		}
		n = min(n*radix+d, tooBig)
	}
	return n, nil
}

// parseIPv6 reads an IPv6 address without brackets. Zones are refused: the
// standard has none, and a zone names an interface of the machine that
// dials.
func parseIPv6(host string) (netip.Addr, error) {
	if strings.Contains(host, "%") {
		return netip.Addr{}, fmt.Errorf("host %q is not a valid name or address: IPv6 zones are not accepted", host)
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is6() {
		return netip.Addr{}, fmt.Errorf("host %q is not a valid name or address: not an IPv6 address", host)
	}
	return a, nil
}

// formatIPv6 is the standard's IPv6 serializer: lowercase hex pieces, the
// first longest run of two or more zero pieces compressed to "::", and no
// dotted IPv4 tail (::ffff:127.0.0.1 is ::ffff:7f00:1), so one address has
// one spelling.
func formatIPv6(a netip.Addr) string {
	b := a.As16()
	var pieces [8]uint16
	for i := range pieces {
		pieces[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
	}
	compress, longest := -1, 1
	for i := 0; i < 8; {
		if pieces[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && pieces[j] == 0 {
			j++
		}
		if j-i > longest {
			compress, longest = i, j-i
		}
		i = j
	}
	var sb strings.Builder
	for i := 0; i < 8; i++ {
		if i == compress {
			if i == 0 {
				sb.WriteString("::")
			} else {
				sb.WriteString(":")
			}
			i += longest - 1
			continue
		}
		sb.WriteString(strconv.FormatUint(uint64(pieces[i]), 16))
		if i != 7 {
			sb.WriteString(":")
		}
	}
	return sb.String()
}
