package urlmsg_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// TestNormalizeHostsAsTheWebHasThem: host names that browsers accept (UTS
// #46 without CheckHyphens or STD3 rules, as the WHATWG URL standard does
// it) are accepted, in their canonical form.
func TestNormalizeHostsAsTheWebHasThem(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	name253 := strings.Repeat(strings.Repeat("b", 49)+".", 5) + "example" // 5*50 + 7 = 257
	name253 = name253[len(name253)-253:]
	tests := []struct {
		name     string
		url      string
		wantHost string
	}{
		{"-- in positions 3-4 (CDN pattern)", "https://r3---sn-4g5e6nsz.googlevideo.com/videoplayback", "r3---sn-4g5e6nsz.googlevideo.com"},
		{"-- in positions 3-4, mixed case", "https://R3---SN-4g5E6nsz.GoogleVideo.COM/", "r3---sn-4g5e6nsz.googlevideo.com"},
		{"ASCII label with -- that is not punycode", "http://ab--cd.example/", "ab--cd.example"},
		{"trailing hyphen", "http://foo-.blogspot.com/", "foo-.blogspot.com"},
		{"leading hyphen", "http://-foo.example.com/", "-foo.example.com"},
		{"hyphens only", "http://---.example/", "---.example"},
		{"leading underscore", "http://_dmarc.example.com/", "_dmarc.example.com"},
		{"underscore inside", "http://my_host.example.com/", "my_host.example.com"},
		{"underscore and hyphens, upper case", "http://My_Host-.Example.COM/", "my_host-.example.com"},
		{"trailing hyphen and trailing dot", "http://foo-.blogspot.com./", "foo-.blogspot.com"},
		{"IDN to punycode", "http://bücher.example/", "xn--bcher-kva.example"},
		{"IDN in upper case", "http://BÜCHER.Example/", "xn--bcher-kva.example"},
		{"punycode kept", "http://xn--bcher-kva.example/", "xn--bcher-kva.example"},
		{"punycode in upper case", "http://XN--BCHER-KVA.EXAMPLE/", "xn--bcher-kva.example"},
		{"sharp s nontransitional", "http://faß.de/", "xn--fa-hia.de"},
		{"IDN with trailing hyphen", "http://bücher-.example/", "xn--bcher--3ya.example"},
		{"fullwidth letters and dot", "http://ｅｘａｍｐｌｅ．ｃｏｍ/", "example.com"},
		{"ideographic full stop", "http://example。com/", "example.com"},
		{"soft hyphen ignored", "http://exa\u00admple.com/", "example.com"},
		{"percent-encoded IDN", "http://b%C3%BCcher.example/", "xn--bcher-kva.example"},
		{"63-byte label", "http://" + label63 + ".example/", label63 + ".example"},
		{"253-byte name", "http://" + name253 + "/", name253},
		{"digits in the first label", "http://123.example/", "123.example"},
		{"last label a word with hex letters", "http://foo.0xbar/", "foo.0xbar"},
		{"last label mixed digits and letters", "http://example.1a/", "example.1a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := urlmsg.Normalize(tt.url)
			if err != nil {
				t.Fatalf("Normalize(%q): %v", tt.url, err)
			}
			if u.Host != tt.wantHost {
				t.Errorf("Normalize(%q) host = %q, want %q", tt.url, u.Host, tt.wantHost)
			}
			again, err := urlmsg.Normalize(u.String())
			if err != nil || again.String() != u.String() {
				t.Errorf("not idempotent: %q -> %q -> %v, %v", tt.url, u, again, err)
			}
			m, err := urlmsg.Validate(urlmsg.Input{URL: tt.url, Host: tt.wantHost})
			if err != nil || m.Host != tt.wantHost {
				t.Errorf("Validate with host field %q: %+v, %v", tt.wantHost, m, err)
			}
		})
	}
}

// TestNormalizeNumericHosts: a host whose last label is a number is an IPv4
// address in any of the forms the WHATWG host parser reads (decimal, octal,
// hex, one to four parts), written back in dotted decimal; IPv6 literals
// are compressed and lowercase, as the standard serialises them.
func TestNormalizeNumericHosts(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		wantURL string
	}{
		{"dotted decimal", "http://93.184.216.34/", "http://93.184.216.34/"},
		{"one decimal number", "http://2130706433/", "http://127.0.0.1/"},
		{"largest number", "http://4294967295/", "http://255.255.255.255/"},
		{"zero", "http://0/", "http://0.0.0.0/"},
		{"hex and decimal", "http://0x7f.1/", "http://127.0.0.1/"},
		{"hex in upper case", "http://0X7F.0X1/", "http://127.0.0.1/"},
		{"hex with many leading zeros", "http://0x000000000000000000007f.1/", "http://127.0.0.1/"},
		{"bare 0x is zero", "http://0x/", "http://0.0.0.0/"},
		{"one hex number", "http://0xC0A80001/", "http://192.168.0.1/"},
		{"octal first part", "http://0177.0.0.1/", "http://127.0.0.1/"},
		{"octal with many leading zeros", "http://000000000000000177.1/", "http://127.0.0.1/"},
		{"two parts", "http://127.1/", "http://127.0.0.1/"},
		{"three parts", "http://127.0.1/", "http://127.0.0.1/"},
		{"three parts, last fills two bytes", "http://10.1.65535/", "http://10.1.255.255/"},
		{"two parts, last fills three bytes", "http://10.16777215/", "http://10.255.255.255/"},
		{"mixed radices", "http://0xc0.0250.0x1.01/", "http://192.168.1.1/"},
		{"mixed radices in three parts", "http://0300.0xa8.257/", "http://192.168.1.1/"},
		{"trailing dot", "http://127.0.0.1./", "http://127.0.0.1/"},
		{"shortened with trailing dot", "http://0x7f.1./", "http://127.0.0.1/"},
		{"with a port", "http://0x7f.1:8080/x", "http://127.0.0.1:8080/x"},
		{"with the default port", "https://2130706433:443/", "https://127.0.0.1/"},
		{"fullwidth digits", "http://１２７．０．０．１/", "http://127.0.0.1/"},
		{"IPv6 loopback", "http://[::1]/", "http://[::1]/"},
		{"IPv6 upper case and zeros", "http://[2001:DB8:0:0:0:0:0:1]/", "http://[2001:db8::1]/"},
		{"IPv6 all zeros", "http://[0:0:0:0:0:0:0:0]/", "http://[::]/"},
		{"IPv6 zeros at the end", "http://[1:0:0:0:0:0:0:0]/", "http://[1::]/"},
		{"IPv6 first longest run compressed", "http://[1:0:0:2:0:0:0:3]/", "http://[1:0:0:2::3]/"},
		{"IPv6 first of equal runs compressed", "http://[1:0:0:2:3:0:0:4]/", "http://[1::2:3:0:0:4]/"},
		{"IPv6 single zero not compressed", "http://[2001:db8:0:1:1:1:1:1]/", "http://[2001:db8:0:1:1:1:1:1]/"},
		{"IPv6 leading zeros in pieces", "http://[2001:0db8:0000:0000:0000:0000:0000:0001]:8080/", "http://[2001:db8::1]:8080/"},
		{"IPv6 with dotted IPv4 tail", "http://[::ffff:192.168.0.1]/", "http://[::ffff:c0a8:1]/"},
		{"IPv6 with dotted IPv4 tail, compatible form", "http://[::127.0.0.1]/", "http://[::7f00:1]/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := urlmsg.Normalize(tt.url)
			if err != nil {
				t.Fatalf("Normalize(%q): %v", tt.url, err)
			}
			if u.String() != tt.wantURL {
				t.Errorf("Normalize(%q) = %q, want %q", tt.url, u, tt.wantURL)
			}
			again, err := urlmsg.Normalize(u.String())
			if err != nil || again.String() != u.String() {
				t.Errorf("not idempotent: %q -> %q -> %v, %v", tt.url, u, again, err)
			}
		})
	}
}

// TestNormalizeRejectsHosts: hosts the standard's parser fails on, and the
// names DNS cannot carry, are invalid input with an error that says why.
func TestNormalizeRejectsHosts(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		wantErr string
	}{
		{"IPv4 parts over 255", "http://256.256.256.256/", `"256.256.256.256" is not a valid IPv4 address: part 256 is over 255`},
		{"IPv4 last part over 255", "http://1.2.3.256/", "last part 256 is over 255"},
		{"IPv4 hex over 32 bits", "http://0x100000000/", "last part 4294967296 is over 4294967295"},
		{"IPv4 decimal over 32 bits", "http://4294967296/", "is not a valid IPv4 address"},
		{"IPv4 two parts, last over 24 bits", "http://1.16777216/", "last part 16777216 is over 16777215"},
		{"IPv4 very long number", "http://" + strings.Repeat("9", 40) + "/", "beyond 2^32"},
		{"IPv4 five parts", "http://1.2.3.4.5/", "5 parts, at most 4"},
		{"IPv4 invalid octal last part", "http://1.2.3.09/", `part "09" is not a base-8 number`},
		{"IPv4 invalid octal first part", "http://08.1/", `part "08" is not a base-8 number`},
		{"IPv4 invalid hex", "http://0x7g.1/", `part "0x7g" is not a base-16 number`},
		{"name ending in a number", "http://example.123/", `"example.123" is not a valid IPv4 address`},
		{"name ending in an invalid number", "http://foo.09/", "is not a valid IPv4 address"},
		{"name ending in hex", "http://foo.0x1/", "is not a valid IPv4 address"},
		{"IPv4 empty part", "http://1..2/", "not a valid IPv4 address: empty part"},
		{"less-than", "http://a<b.example/", `forbidden code point '<'`},
		{"greater-than", "http://a>b.example/", `forbidden code point '>'`},
		{"percent after decoding", "http://ex%25ample.com/", `forbidden code point '%'`},
		{"fullwidth percent maps to percent", "http://ex％ample.com/", `forbidden code point '%'`},
		{"mapping to a space", "http://\u02d9/", "forbidden code point ' '"},
		{"exclamation mark", "http://a!b.example/", `'!' is not a letter, digit, '-' or '_'`},
		{"asterisk", "http://*.example/", `'*' is not a letter, digit, '-' or '_'`},
		{"empty label", "http://a..example/", "empty label"},
		{"two trailing dots", "http://example.com../", "empty label"},
		{"64-byte label", "http://" + strings.Repeat("a", 64) + ".example/", "is 64 bytes, the limit is 63"},
		{"254-byte name", "http://" + strings.Repeat("a.", 127) + "b/", "is 255 bytes, the limit is 253"},
		{"IDN label over 63 bytes as punycode", "http://ü" + strings.Repeat("j", 60) + ".example/", "the limit is 63"},
		{"bad punycode", "http://xn--a.example/", "not a valid name"},
		{"punycode of plain ASCII", "http://xn--abc-.example/", "not a valid name"},
		{"bidi rule broken", "http://a\u05d0.example/", "not a valid name"},
		{"joiner out of context", "http://a\u200db.example/", "not a valid name"},
		{"disallowed code point", "http://a\u2028b.example/", "not a valid name"},
		{"only an ignored character", "http://\u00ad/", "host is empty"},
		{"only an ideographic full stop", "http://。/", "host is empty"},
		{"IPv6 zone", "http://[fe80::1%25eth0]/", "IPv6 zones are not accepted"},
		{"IPv6 with leading zero in IPv4 tail", "http://[::ffff:127.0.0.01]/", "does not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := urlmsg.Normalize(tt.url)
			if err == nil {
				t.Fatalf("Normalize(%q) = %q, want an error containing %q", tt.url, u, tt.wantErr)
			}
			if !errors.Is(err, urlmsg.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

// TestValidateHostFieldNumericForms: the host field is read by the same
// parser, so any spelling of the URL's address matches it.
func TestValidateHostFieldNumericForms(t *testing.T) {
	tests := []struct {
		name string
		in   urlmsg.Input
	}{
		{"shortened host, decimal url", urlmsg.Input{Host: "127.1", URL: "http://2130706433/"}},
		{"hex host with port", urlmsg.Input{Host: "0x7f.0.0.1:8080", URL: "http://127.0.0.1:8080/"}},
		{"mapped IPv6 in two spellings", urlmsg.Input{Host: "[::ffff:7f00:1]", URL: "http://[::ffff:127.0.0.1]/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := urlmsg.Validate(tt.in); err != nil {
				t.Errorf("Validate(%+v): %v", tt.in, err)
			}
		})
	}
	if _, err := urlmsg.Validate(urlmsg.Input{Host: "127.0.0.2", URL: "http://127.1/"}); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("host 127.0.0.2 for http://127.1/: %v, want a mismatch", err)
	}
}
