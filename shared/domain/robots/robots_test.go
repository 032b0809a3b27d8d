package robots_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/robots"
)

// ourUA is a realistic User-Agent: the product token first, then details.
const ourUA = "urldownloader/1.0 (+https://example.com/bot)"

func mustParse(t *testing.T, body string) *robots.Rules {
	t.Helper()
	r, err := robots.Parse(200, []byte(body))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return r
}

type verdict struct {
	ua    string
	path  string
	allow bool
}

func TestAllowed(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		verdicts []verdict
	}{
		{
			name: "disallow a directory",
			body: "User-agent: *\nDisallow: /private\n",
			verdicts: []verdict{
				{ourUA, "/private", false},
				{ourUA, "/private/page.html", false},
				{ourUA, "/privateer", false}, // a prefix match, as the standard says
				{ourUA, "/public", true},
				{ourUA, "/", true},
			},
		},
		{
			name: "longer allow beats shorter disallow",
			body: "User-agent: *\nDisallow: /shop\nAllow: /shop/public\n",
			verdicts: []verdict{
				{ourUA, "/shop/cart", false},
				{ourUA, "/shop/public/item", true},
			},
		},
		{
			name: "disallow everything",
			body: "User-agent: *\nDisallow: /\n",
			verdicts: []verdict{
				{ourUA, "/", false},
				{ourUA, "/anything?x=1", false},
				{ourUA, "/robots.txt", true}, // always allowed
			},
		},
		{
			name: "wildcard star",
			body: "User-agent: *\nDisallow: /*.pdf\nDisallow: /*?sessionid=\n",
			verdicts: []verdict{
				{ourUA, "/docs/report.pdf", false},
				{ourUA, "/docs/report.html", true},
				{ourUA, "/page?sessionid=42", false},
				{ourUA, "/page?lang=en", true},
			},
		},
		{
			name: "dollar anchors the end",
			body: "User-agent: *\nDisallow: /*.php$\nDisallow: /exact$\n",
			verdicts: []verdict{
				{ourUA, "/index.php", false},
				{ourUA, "/index.php?x=1", true},
				{ourUA, "/exact", false},
				{ourUA, "/exact/more", true},
			},
		},
		{
			name: "our specific group beats star",
			body: "User-agent: *\nDisallow: /\n\nUser-agent: urldownloader\nDisallow: /private\n",
			verdicts: []verdict{
				{ourUA, "/public", true},
				{ourUA, "/private/x", false},
				{"otherbot/2.0", "/public", false},
			},
		},
		{
			name: "group matching ignores case and the version in the file",
			body: "User-agent: *\nDisallow: /\n\nUser-agent: URLDownloader/2.0\nAllow: /\n",
			verdicts: []verdict{
				{ourUA, "/page", true},
				{"URLDOWNLOADER", "/page", true},
			},
		},
		{
			name: "several user-agents share one group",
			body: "User-agent: otherbot\nUser-agent: urldownloader\nDisallow: /x\n\nUser-agent: *\nDisallow: /\n",
			verdicts: []verdict{
				{ourUA, "/x/1", false},
				{ourUA, "/y", true},
				{"otherbot", "/y", true},
			},
		},
		{
			name: "an empty disallow ends its group instead of merging with the next",
			body: "User-agent: urldownloader\nDisallow:\n\nUser-agent: *\nDisallow: /\n",
			verdicts: []verdict{
				{ourUA, "/anything", true},
				{"otherbot", "/anything", false},
			},
		},
		{
			name: "an empty user-agent starts a group for nobody",
			body: "User-agent: urldownloader\nDisallow: /x\nUser-agent:\nDisallow: /\n",
			verdicts: []verdict{
				{ourUA, "/y", true},
				{ourUA, "/x", false},
			},
		},
		{
			name: "rules before any user-agent apply to nobody",
			body: "Disallow: /\nUser-agent: *\nDisallow: /private\n",
			verdicts: []verdict{
				{ourUA, "/", true},
				{ourUA, "/private", false},
			},
		},
		{
			name: "no group for us and no star group allows all",
			body: "User-agent: otherbot\nDisallow: /\n",
			verdicts: []verdict{
				{ourUA, "/", true},
				{"otherbot", "/", false},
			},
		},
		{
			name: "comments, CRLF, BOM, odd spacing and a missing colon",
			body: "\uFEFF# robots for example.com\r\nUser-agent : * # everyone\r\nDisallow /private\r\nDISALLOW:/tmp   # scratch\r\nSitemap: https://example.com/sitemap.xml\r\n",
			verdicts: []verdict{
				{ourUA, "/private/a", false},
				{ourUA, "/tmp/x", false},
				{ourUA, "/home", true},
			},
		},
		{
			name: "a malformed crawl-delay does not void the file",
			body: "User-agent: *\nCrawl-delay: soon\nDisallow: /private\n",
			verdicts: []verdict{
				{ourUA, "/private", false},
				{ourUA, "/public", true},
			},
		},
		{
			name: "a malformed crawl-delay still closes its group",
			body: "User-agent: slowbot\nCrawl-delay: 10s\nUser-agent: urldownloader\nDisallow: /\n",
			verdicts: []verdict{
				{"slowbot", "/page", true},
				{ourUA, "/page", false},
			},
		},
		{
			name: "full URLs and bare paths are accepted",
			body: "User-agent: *\nDisallow: /private\n",
			verdicts: []verdict{
				{ourUA, "https://example.com/private/x?y=1", false},
				{ourUA, "http://example.com", true},
				{ourUA, "private/x", false},
				{ourUA, "", true},
			},
		},
		{
			name: "issue 9: a longer directory rule beats a shorter wildcard allow",
			body: "User-agent: *\nDisallow: /admin/\nAllow: /*.php\n",
			verdicts: []verdict{
				{ourUA, "/admin/index.php", false}, // 7 octets beat 6
				{ourUA, "/admin/", false},
				{ourUA, "/index.php", true},
			},
		},
		{
			name: "issue 9: a non-ASCII rule is percent-encoded",
			body: "User-agent: *\nDisallow: /café\n",
			verdicts: []verdict{
				{ourUA, "/caf%C3%A9", false},
				{ourUA, "/caf%c3%a9/menu", false},
				{ourUA, "https://example.com/café", false},
				{ourUA, "/cafe", true},
			},
		},
		{
			name: "issue 9: escapes of unreserved characters are decoded on both sides",
			body: "User-agent: *\nDisallow: /private\nDisallow: /%7Euser\n",
			verdicts: []verdict{
				{ourUA, "/%70rivate", false},
				{ourUA, "/%70%72%69%76%61%74%65/x", false},
				{ourUA, "/~user/page", false},
				{ourUA, "/%7euser", false},
				{ourUA, "/public", true},
			},
		},
		{
			name: "an escaped slash is not a slash",
			body: "User-agent: *\nDisallow: /a%2Fb\nDisallow: /c/d\n",
			verdicts: []verdict{
				{ourUA, "/a%2Fb", false},
				{ourUA, "/a%2fb", false},
				{ourUA, "/a/b", true},
				{ourUA, "/c%2Fd", true},
				{ourUA, "/c/d", false},
			},
		},
		{
			name: "a lone percent sign stands for itself",
			body: "User-agent: *\nDisallow: /100%\nDisallow: /50%zz\n",
			verdicts: []verdict{
				{ourUA, "/100%25", false},
				{ourUA, "/100%", false},
				{ourUA, "/50%25zz", false},
				{ourUA, "/100", true},
			},
		},
		{
			name: "spaces and other characters a URI may not hold are encoded",
			body: "User-agent: *\nDisallow: /my file.html\nDisallow: /a|b\n",
			verdicts: []verdict{
				{ourUA, "/my%20file.html", false},
				{ourUA, "/my file.html", false},
				{ourUA, "/a%7Cb", false},
				{ourUA, "/my", true},
			},
		},
		{
			name: "a tie of octets goes to allow, whatever the order",
			body: "User-agent: *\nDisallow: /ab\nAllow: /a*\nDisallow: /x*\nAllow: /xy\n",
			verdicts: []verdict{
				{ourUA, "/abc", true},
				{ourUA, "/xyz", true},
				{ourUA, "/xz", false},
			},
		},
		{
			name: "an anchored rule against a longer wildcard rule",
			body: "User-agent: *\nDisallow: /*.php$\nAllow: /shop/*\nAllow: /shop/*.php\nAllow: /x$\nDisallow: /x\n",
			verdicts: []verdict{
				{ourUA, "/index.php", false},
				{ourUA, "/shop/cart.php", true},     // 11 octets beat 8
				{ourUA, "/shop/cart.php?a=1", true}, // $ does not match, allow /shop/* does
				{ourUA, "/x", true},                 // "/x$" is 3 octets, "/x" 2
				{ourUA, "/x/y", false},
			},
		},
		{
			name: "a dollar inside a rule is a literal dollar",
			body: "User-agent: *\nDisallow: /a$b\nDisallow: /c$$\n",
			verdicts: []verdict{
				{ourUA, "/a$b", false},
				{ourUA, "/a%24b/x", false},
				{ourUA, "/a", true},
				{ourUA, "/c$", false},
				{ourUA, "/c$d", true},
			},
		},
		{
			name: "repeated and trailing stars",
			body: "User-agent: *\nDisallow: /a**b\nDisallow: /c*\nDisallow: *.gif*$\n",
			verdicts: []verdict{
				{ourUA, "/ab", false},
				{ourUA, "/a/x/b", false},
				{ourUA, "/a", true},
				{ourUA, "/c", false},
				{ourUA, "/x.gif?v=1", false},
				{ourUA, "/x.png", true},
			},
		},
		{
			name: "empty rules match nothing",
			body: "User-agent: *\nAllow:\nDisallow: /\n\nUser-agent: urldownloader\nDisallow:\nAllow:\n",
			verdicts: []verdict{
				{ourUA, "/page", true},
				{"otherbot", "/page", false}, // the empty allow did not open /
			},
		},
		{
			name: "a rule that does not start with / or * matches nothing",
			body: "User-agent: *\nDisallow: private\n",
			verdicts: []verdict{
				{ourUA, "/private", true},
				{ourUA, "private", true},
			},
		},
		{
			name: "our groups merge across the file, star groups between them do not join",
			body: "User-agent: urldownloader\nDisallow: /a\n\nUser-agent: *\nDisallow: /b\n\nUser-agent: URLDownloader\nAllow: /a/open\nDisallow: /c\n",
			verdicts: []verdict{
				{ourUA, "/a/x", false},
				{ourUA, "/a/open/x", true},
				{ourUA, "/c", false},
				{ourUA, "/b", true},
				{"otherbot", "/b", false},
				{"otherbot", "/a", true},
			},
		},
		{
			name: "star groups merge too",
			body: "User-agent: *\nDisallow: /a\n\nUser-agent: otherbot\nDisallow: /\n\nUser-agent: *\nDisallow: /b\n",
			verdicts: []verdict{
				{ourUA, "/a", false},
				{ourUA, "/b", false},
				{ourUA, "/c", true},
			},
		},
		{
			name: "the token in the file is matched whole",
			body: "User-agent: urldownloaderx\nDisallow: /\nUser-agent: urldownload\nDisallow: /\n",
			verdicts: []verdict{
				{ourUA, "/page", true},
			},
		},
		{
			name: "star followed by words is still star",
			body: "User-agent: * (everyone)\nDisallow: /x\n",
			verdicts: []verdict{
				{ourUA, "/x", false},
			},
		},
		{
			name: "a colon-less line of more than two words is not a rule",
			body: "User-agent: *\nDisallow /a\nDisallow /b and /c\n",
			verdicts: []verdict{
				{ourUA, "/a", false},
				{ourUA, "/b", true},
			},
		},
		{
			name: "CR-only line endings and blank lines inside a group",
			body: "User-agent: urldownloader\r\r\rDisallow: /a\rUser-agent: *\rDisallow: /\r",
			verdicts: []verdict{
				{ourUA, "/a", false},
				{ourUA, "/b", true},
				{"otherbot", "/b", false},
			},
		},
		{
			name: "mixed line endings and no final newline",
			body: "User-agent: *\nDisallow: /a\r\nDisallow: /b\rDisallow: /c",
			verdicts: []verdict{
				{ourUA, "/a", false},
				{ourUA, "/b", false},
				{ourUA, "/c", false},
				{ourUA, "/d", true},
			},
		},
		{
			name: "a fragment is no part of the path",
			body: "User-agent: *\nDisallow: /page$\nDisallow: /x#y\n",
			verdicts: []verdict{
				{ourUA, "/page#section", false},
				{ourUA, "https://example.com/page#x", false},
				{ourUA, "/pages#x", true},
				{ourUA, "/x", false}, // a comment starts at # in the file
			},
		},
		{
			name:     "empty file allows all",
			body:     "",
			verdicts: []verdict{{ourUA, "/", true}, {ourUA, "/private", true}},
		},
		{
			name:     "blank and comment-only file allows all",
			body:     "\n\n  # nothing to see\n",
			verdicts: []verdict{{ourUA, "/any", true}},
		},
		{
			name:     "an HTML page served as robots.txt allows all",
			body:     "<html><body>Not found</body></html>",
			verdicts: []verdict{{ourUA, "/any", true}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustParse(t, tc.body)
			for _, v := range tc.verdicts {
				if got := r.Allowed(v.ua, v.path); got != v.allow {
					t.Errorf("Allowed(%q, %q) = %v, want %v", v.ua, v.path, got, v.allow)
				}
			}
		})
	}
}

func TestCrawlDelay(t *testing.T) {
	tests := []struct {
		name string
		body string
		ua   string
		want time.Duration
	}{
		{"none", "User-agent: *\nDisallow: /x\n", ourUA, 0},
		{"whole seconds", "User-agent: *\nCrawl-delay: 5\n", ourUA, 5 * time.Second},
		{"fraction", "User-agent: *\nCrawl-delay: 0.5\n", ourUA, 500 * time.Millisecond},
		{"fraction above one", "User-agent: *\nCrawl-delay: 2.25\n", ourUA, 2250 * time.Millisecond},
		{"our group beats star", "User-agent: *\nCrawl-delay: 10\n\nUser-agent: urldownloader\nCrawl-delay: 1\n", ourUA, time.Second},
		{"star applies to others", "User-agent: *\nCrawl-delay: 10\n\nUser-agent: urldownloader\nCrawl-delay: 1\n", "otherbot", 10 * time.Second},
		{"our group without delay does not inherit star's", "User-agent: *\nCrawl-delay: 10\n\nUser-agent: urldownloader\nDisallow: /x\n", ourUA, 0},
		{"crawldelay spelling", "User-agent: *\nCrawldelay: 3\n", ourUA, 3 * time.Second},
		{"not a number is ignored", "User-agent: *\nCrawl-delay: soon\n", ourUA, 0},
		{"negative is ignored", "User-agent: *\nCrawl-delay: -4\n", ourUA, 0},
		{"infinite is forever", "User-agent: *\nCrawl-delay: Inf\n", ourUA, robots.Forever},
		{"overflowing is forever", "User-agent: *\nCrawl-delay: 1e400\n", ourUA, robots.Forever},
		{"past a Duration is forever", "User-agent: *\nCrawl-delay: 1e300\n", ourUA, robots.Forever},
		{"a billion seconds is not clamped", "User-agent: *\nCrawl-delay: 1e9\n", ourUA, 1e9 * time.Second},
		{"a day and a second is not clamped", "User-agent: *\nCrawl-delay: 86401\n", ourUA, 86401 * time.Second},
		{"underflowing is none", "User-agent: *\nCrawl-delay: 1e-400\n", ourUA, 0},
		{"minus infinity is ignored", "User-agent: *\nCrawl-delay: -inf\n", ourUA, 0},
		{"NaN is ignored", "User-agent: *\nCrawl-delay: NaN\n", ourUA, 0},
		{"before any user-agent is ignored", "Crawl-delay: 7\nUser-agent: *\nDisallow: /x\n", ourUA, 0},
		{"empty file", "", ourUA, 0},
		{"merged groups take the largest", "User-agent: urldownloader\nCrawl-delay: 2\n\nUser-agent: *\nCrawl-delay: 9\n\nUser-agent: urldownloader\nCrawl-delay: 5\n", ourUA, 5 * time.Second},
		{"rounded to the nanosecond", "User-agent: *\nCrawl-delay: 0.3\n", ourUA, 300 * time.Millisecond},
		{"a unit after the number", "User-agent: *\nCrawl-delay: 10 seconds\n", ourUA, 10 * time.Second},
		{"product token case", "User-agent: URLDOWNLOADER\nCrawl-delay: 4\n", ourUA, 4 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustParse(t, tc.body).CrawlDelay(tc.ua); got != tc.want {
				t.Errorf("CrawlDelay(%q) = %v, want %v", tc.ua, got, tc.want)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	const denyAll = "User-agent: *\nDisallow: /\n"
	tests := []struct {
		status    int
		wantErr   error // nil: rules returned
		wantAllow bool
	}{
		{200, nil, false},
		{203, nil, false},
		{301, robots.ErrRedirect, false},
		{302, robots.ErrRedirect, false},
		{308, robots.ErrRedirect, false},
		{400, nil, true},
		{401, nil, true},
		{403, nil, true},
		{404, nil, true},
		{410, nil, true},
		{451, nil, true},
		{429, robots.ErrUnavailable, false},
		{500, robots.ErrUnavailable, false},
		{502, robots.ErrUnavailable, false},
		{503, robots.ErrUnavailable, false},
		{504, robots.ErrUnavailable, false},
		{100, robots.ErrUnavailable, false},
		{0, robots.ErrUnavailable, false},
		{600, robots.ErrUnavailable, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			// The body says "deny all" every time: only a 2xx may apply it.
			r, err := robots.Parse(tc.status, []byte(denyAll))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Parse(%d) error = %v, want %v", tc.status, err, tc.wantErr)
				}
				if r != nil {
					t.Errorf("Parse(%d) returned rules with an error", tc.status)
				}
				if !strings.Contains(err.Error(), fmt.Sprint(tc.status)) {
					t.Errorf("error %q does not name the status", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%d): %v", tc.status, err)
			}
			if got := r.Allowed(ourUA, "/page"); got != tc.wantAllow {
				t.Errorf("Allowed after %d = %v, want %v", tc.status, got, tc.wantAllow)
			}
			if r.Status() != tc.status {
				t.Errorf("Status() = %d, want %d", r.Status(), tc.status)
			}
			if tc.status >= 400 && len(r.Raw()) != 0 {
				t.Errorf("a %d kept %d raw bytes; nothing is needed to rebuild allow-all", tc.status, len(r.Raw()))
			}
		})
	}
}

func TestNilRulesAllowNothing(t *testing.T) {
	var r *robots.Rules
	if r.Allowed(ourUA, "/") {
		t.Error("nil Rules allowed a fetch")
	}
	if d := r.CrawlDelay(ourUA); d != 0 {
		t.Errorf("nil Rules crawl delay = %v", d)
	}
}

// TestHugeFileCapped builds a file over MaxBytes: rules past the cap are
// ignored, and the cut falls on a line boundary so that a line cut in half
// ("Disallow: /" out of "Disallow: /zzz") cannot block the whole site.
func TestHugeFileCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("User-agent: *\nDisallow: /early\n")
	for i := 0; b.Len() < robots.MaxBytes-len("Disallow: /")-20; i++ {
		fmt.Fprintf(&b, "Allow: /filler/%06d\n", i)
	}
	// Pad so that the cap falls right after "Disallow: /".
	b.WriteString(strings.Repeat("#", robots.MaxBytes-b.Len()-len("Disallow: /")-1) + "\n")
	b.WriteString("Disallow: /zzz\n")
	for b.Len() < robots.MaxBytes+100<<10 {
		b.WriteString("Disallow: /late\n")
	}
	body := []byte(b.String())

	r := mustParse(t, string(body))
	if n := len(r.Raw()); n > robots.MaxBytes {
		t.Fatalf("kept %d raw bytes, cap is %d", n, robots.MaxBytes)
	}
	if !bytes.HasSuffix(r.Raw(), []byte("\n")) {
		t.Error("raw text does not end on a whole line")
	}
	for _, v := range []verdict{
		{ourUA, "/early/x", false}, // before the cap: applies
		{ourUA, "/late/x", true},   // after the cap: ignored
		{ourUA, "/home", true},     // the half line did not become "Disallow: /"
		{ourUA, "/zzz", true},      // and the cut line is gone entirely
	} {
		if got := r.Allowed(v.ua, v.path); got != v.allow {
			t.Errorf("Allowed(%q) = %v, want %v", v.path, got, v.allow)
		}
	}
}

// TestRoundTrip checks that Status and Raw are all a cache needs to store.
func TestRoundTrip(t *testing.T) {
	body := []byte("User-agent: *\nDisallow: /private\nCrawl-delay: 1.5\n\nUser-agent: urldownloader\nDisallow: /mine$\n")
	orig, err := robots.Parse(200, body)
	if err != nil {
		t.Fatal(err)
	}
	// The Rules must not share the caller's buffer.
	copy(body, bytes.Repeat([]byte("x"), len(body)))

	again, err := robots.Parse(orig.Status(), orig.Raw())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*robots.Rules{orig, again} {
		for _, v := range []verdict{{ourUA, "/mine", false}, {ourUA, "/private", true}, {"otherbot", "/private", false}} {
			if got := r.Allowed(v.ua, v.path); got != v.allow {
				t.Errorf("Allowed(%q, %q) = %v, want %v", v.ua, v.path, got, v.allow)
			}
		}
		if d := r.CrawlDelay("otherbot"); d != 1500*time.Millisecond {
			t.Errorf("CrawlDelay = %v", d)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	r := mustParse(t, "User-agent: *\nDisallow: /*.pdf$\nCrawl-delay: 2\n")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				p := fmt.Sprintf("/d%d/f%d.pdf", i, j)
				if r.Allowed(ourUA, p) || r.CrawlDelay(ourUA) != 2*time.Second {
					t.Errorf("wrong verdict for %s", p)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestProductToken(t *testing.T) {
	tests := []struct{ ua, want string }{
		{"urldownloader/1.0 (+https://example.com/bot)", "urldownloader"},
		{"URLDownloader", "urldownloader"},
		{"  urldownloader/2  ", "urldownloader"},
		{"urldownloader (compatible)", "urldownloader"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := robots.ProductToken(tc.ua); got != tc.want {
			t.Errorf("ProductToken(%q) = %q, want %q", tc.ua, got, tc.want)
		}
	}
}

// TestLargeFile reads a 600 KiB file with CRLF line endings, a BOM and a
// 100 KiB line: every rule that ends within MaxBytes is honoured, the long
// one included, and none after it.
func TestLargeFile(t *testing.T) {
	long := "/long/" + strings.Repeat("a", 100<<10)
	var b strings.Builder
	b.WriteString("\uFEFFUser-agent: *\r\nDisallow: " + long + "\r\n")
	var filler []string
	for b.Len() < robots.MaxBytes-1000 {
		filler = append(filler, fmt.Sprintf("/filler/%07d", b.Len()))
		b.WriteString("Disallow: " + filler[len(filler)-1] + "\r\n")
	}
	const last = "Disallow: /before-cap\r\n"
	b.WriteString("#" + strings.Repeat("-", robots.MaxBytes-b.Len()-len(last)-3) + "\r\n")
	b.WriteString(last) // ends exactly at MaxBytes
	for b.Len() < 600<<10 {
		b.WriteString("Disallow: /after-cap\r\n")
	}

	r := mustParse(t, b.String())
	if n := len(r.Raw()); n != robots.MaxBytes {
		t.Errorf("kept %d raw bytes, want exactly %d", n, robots.MaxBytes)
	}
	for _, v := range []verdict{
		{ourUA, long, false},
		{ourUA, long + "/x", false},
		{ourUA, "/long/aaa", true},
		{ourUA, filler[0], false},
		{ourUA, filler[len(filler)-1], false},
		{ourUA, "/filler/x", true},
		{ourUA, "/before-cap", false},
		{ourUA, "/after-cap", true},
	} {
		if got := r.Allowed(v.ua, v.path); got != v.allow {
			t.Errorf("Allowed(%.40q) = %v, want %v", v.path, got, v.allow)
		}
	}
}

// TestCrawlDelayAsked checks that the delay that applies is also given as
// the file wrote it, for messages: the largest of merged groups.
func TestCrawlDelayAsked(t *testing.T) {
	r := mustParse(t, "User-agent: urldownloader\nCrawl-delay: 2\n\nUser-agent: *\nCrawl-delay: inf\n\nUser-agent: urldownloader\nCrawl-delay: 1e9 seconds\n")
	if got := r.CrawlDelayAsked(ourUA); got != "1e9" {
		t.Errorf("CrawlDelayAsked(ours) = %q, want 1e9", got)
	}
	if got := r.CrawlDelayAsked("otherbot"); got != "inf" || r.CrawlDelay("otherbot") != robots.Forever {
		t.Errorf("CrawlDelayAsked(other) = %q (%v), want inf (Forever)", got, r.CrawlDelay("otherbot"))
	}
	if got := mustParse(t, "User-agent: *\nDisallow: /x\n").CrawlDelayAsked(ourUA); got != "" {
		t.Errorf("CrawlDelayAsked without a Crawl-delay = %q, want none", got)
	}
}
