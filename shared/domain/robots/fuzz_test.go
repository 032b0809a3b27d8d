package robots_test

import (
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/robots"
)

// FuzzAllowed parses any body and asks about any path: Parse never fails on
// a 2xx, nothing panics, /robots.txt is always allowed, the Crawl-delay
// stays within bounds, and Raw rebuilds the same verdict.
func FuzzAllowed(f *testing.F) {
	for _, s := range []struct{ body, ua, path string }{
		{"User-agent: *\nDisallow: /admin/\nAllow: /*.php\n", ourUA, "/admin/index.php"},
		{"User-agent: *\nDisallow: /café\n", ourUA, "/caf%C3%A9"},
		{"User-agent: *\nDisallow: /private\n", ourUA, "/%70rivate"},
		{"\uFEFFUser-Agent: foobot\r\nDisallow:/\rAllow:/example/page.html\n", "foobot", "https://h/example/page.html#x"},
		{"User-agent: *\nDisallow: /\nDisallow: /robots.txt$\n", "bot", "/robots.txt"},
		{"user-agent: *\ndisallow: *.gif$\ncrawl-delay: 0.5\n", "", "?x.gif"},
		{"User-agent: *\nDisallow: /%\nAllow: /a%2\n", "x", "/a%2%"},
		{"User-agent: * \nDisallow: /a*$*b$$\n", "x/1", "/a$b"},
		{"Disallow /\nUser-agent *\nCrawl-delay 1e400\n", "*", "http://h"},
	} {
		f.Add([]byte(s.body), s.ua, s.path)
	}
	f.Fuzz(func(t *testing.T, body []byte, ua, path string) {
		r, err := robots.Parse(200, body)
		if err != nil {
			t.Fatalf("Parse(200): %v", err)
		}
		got := r.Allowed(ua, path)
		for _, p := range []string{"/robots.txt", "https://example.com/robots.txt", "/robots.txt#top"} {
			if !r.Allowed(ua, p) {
				t.Fatalf("Allowed(%q, %q) = false", ua, p)
			}
		}
		if d := r.CrawlDelay(ua); d < 0 {
			t.Fatalf("CrawlDelay = %v", d)
		}
		again, err := robots.Parse(r.Status(), r.Raw())
		if err != nil {
			t.Fatalf("Parse(Raw()): %v", err)
		}
		if again.Allowed(ua, path) != got {
			t.Fatalf("verdict for %q changed after a round trip through Raw", path)
		}
	})
}
