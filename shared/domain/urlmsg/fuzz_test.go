package urlmsg_test

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// The seed corpora live in testdata/fuzz/FuzzParse and
// testdata/fuzz/FuzzNormalize (hostile payloads and URLs); failures found by
// fuzzing are added there as regression cases.

// FuzzParse feeds arbitrary payload bytes to Parse: it must never panic,
// and whatever it accepts must be a fixed point of Validate.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"host":"example.com","url":"http://example.com/"}`))
	f.Add([]byte(`{"url":"http://example.com/a","etag":"\"v\"","validatorsUrl":"HTTP://example.com:80/b"}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		msgs, bad, err := urlmsg.Parse("fuzz", payload)
		if err != nil {
			if !errors.Is(err, urlmsg.ErrInvalid) {
				t.Fatalf("payload error %v does not wrap ErrInvalid", err)
			}
			if msgs != nil || bad != nil {
				t.Fatalf("payload error %v returned with items %+v %+v", err, msgs, bad)
			}
			return
		}
		if n := len(msgs) + len(bad); n == 0 || n > urlmsg.MaxItems {
			t.Fatalf("%d items judged; want 1..%d", n, urlmsg.MaxItems)
		}
		for _, m := range msgs {
			if len(m.URL) > urlmsg.MaxURLLength {
				t.Fatalf("accepted a %d-byte url", len(m.URL))
			}
			if len(m.ID) != 24 {
				t.Fatalf("message %q has ID %q", m.URL, m.ID)
			}
			again, err := urlmsg.Validate(urlmsg.Input{URL: m.URL, Host: m.Host, ETag: m.ETag, LastModified: m.LastModified, ValidatorsURL: m.ValidatorsURL})
			if err != nil {
				t.Fatalf("accepted %q (host %q), which re-validation rejects: %v", m.URL, m.Host, err)
			}
			if again.URL != m.URL || again.Host != m.Host || again.ValidatorsURL != m.ValidatorsURL {
				t.Fatalf("not idempotent: %q/%q/%q re-validates to %q/%q/%q", m.URL, m.Host, m.ValidatorsURL, again.URL, again.Host, again.ValidatorsURL)
			}
			if m.ValidatorsURL == m.URL || (m.ValidatorsURL != "" && m.ETag == "" && m.LastModified == "") {
				t.Fatalf("accepted validators url %q for %q with etag %q, lastModified %q", m.ValidatorsURL, m.URL, m.ETag, m.LastModified)
			}
		}
		last := -1
		for _, ie := range bad {
			if ie.Index <= last || ie.Index >= len(msgs)+len(bad) {
				t.Fatalf("item error index %d out of order or range (%d items)", ie.Index, len(msgs)+len(bad))
			}
			last = ie.Index
			if !strings.HasPrefix(ie.Error, urlmsg.ErrInvalid.Error()) {
				t.Fatalf("item error %q is not an invalid-input error", ie.Error)
			}
		}
	})
}

// FuzzNormalize feeds arbitrary strings to Normalize: it must never panic,
// and what it returns must be http(s), within the length limit, without
// user-info or fragment, and normalise to itself.
func FuzzNormalize(f *testing.F) {
	f.Add("http://example.com/")
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := urlmsg.Normalize(raw)
		checkStable(t, raw, u, err)
		if err != nil {
			if !errors.Is(err, urlmsg.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		s := u.String()
		if len(s) > urlmsg.MaxURLLength {
			t.Fatalf("accepted a %d-byte url", len(s))
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("accepted scheme %q", u.Scheme)
		}
		if u.User != nil || u.Fragment != "" || u.Host == "" || u.Path == "" {
			t.Fatalf("accepted %q with user-info, fragment, no host or no path", s)
		}
		if u.Host != strings.ToLower(u.Host) {
			t.Fatalf("host %q is not lowercase", u.Host)
		}
		checkHostShape(t, u.Hostname())
		u2, err := urlmsg.Normalize(s)
		if err != nil {
			t.Fatalf("Normalize(%q) = %q, which Normalize rejects: %v", raw, s, err)
		}
		if s2 := u2.String(); s2 != s {
			t.Fatalf("not idempotent: %q -> %q -> %q", raw, s, s2)
		}
		m, err := urlmsg.Validate(urlmsg.Input{URL: raw})
		if err != nil || m.URL != s || m.Host != u.Host {
			t.Fatalf("Validate(%q) = %+v, %v; want the Normalize result %q", raw, m, err, s)
		}
	})
}

// checkStable compares Normalize with the parser before webForm: a URL
// that parser accepted is still accepted, and when webForm has nothing to
// encode in it (no space, control, non-ASCII, quote... in its path, query
// or fragment) its normal form, and so its id and dedup key, is what it
// was.
func checkStable(t *testing.T, raw string, u *url.URL, err error) {
	t.Helper()
	legacy, lerr := urlmsg.LegacyNormalize(raw)
	if lerr != nil {
		return
	}
	if err != nil {
		t.Fatalf("Normalize(%q) refuses what it accepted before (as %q): %v", raw, legacy, err)
	}
	if got := u.String(); urlmsg.WebForm(raw) == raw && got != legacy {
		t.Fatalf("Normalize(%q) = %q, was %q: the normal form of a URL that needs no encoding changed", raw, got, legacy)
	}
}

// checkHostShape: an accepted host is an IP address in its one canonical
// spelling (dotted decimal; IPv6 without a dotted tail, as the standard
// writes it), or a DNS name a resolver can look up.
func checkHostShape(t *testing.T, host string) {
	t.Helper()
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			t.Fatalf("host %q has a zone", host)
		}
		if a.Is4() && a.String() != host {
			t.Fatalf("IPv4 host %q is not in dotted decimal (%s)", host, a)
		}
		if a.Is6() && strings.Contains(host, ".") {
			t.Fatalf("IPv6 host %q has a dotted tail", host)
		}
		return
	}
	if len(host) > 253 {
		t.Fatalf("host name of %d bytes", len(host))
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Fatalf("host %q has the label %q, which DNS cannot carry", host, l)
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		t.Fatalf("host name %q ends in a number, so it should have been an IPv4 address", host)
	}
}
