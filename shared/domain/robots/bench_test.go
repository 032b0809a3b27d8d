package robots_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/robots"
)

// benchFile is shaped like the robots.txt of a large site: a long "*" group
// with prefixes and wildcards, a few named groups, a sitemap.
func benchFile() string {
	var b strings.Builder
	b.WriteString("# robots.txt for www.example.com\nSitemap: https://www.example.com/sitemap.xml\n\n")
	b.WriteString("User-agent: *\nCrawl-delay: 1\n")
	for i := range 60 {
		fmt.Fprintf(&b, "Disallow: /section%02d/private/\n", i)
		fmt.Fprintf(&b, "Allow: /section%02d/private/*.css$\n", i)
	}
	b.WriteString("Disallow: /*?sessionid=\nDisallow: /*/print$\nDisallow: /search\nAllow: /search/about\n")
	b.WriteString("Disallow: /*.pdf$\nDisallow: /admin/\nAllow: /*.php\nDisallow: /caf%C3%A9/\n")
	for _, bot := range []string{"googlebot", "bingbot", "otherbot"} {
		fmt.Fprintf(&b, "\nUser-agent: %s\nDisallow: /nogoogle\nAllow: /\n", bot)
	}
	return b.String()
}

var benchPaths = []string{
	"https://www.example.com/",
	"https://www.example.com/section07/private/page.html",
	"https://www.example.com/section59/private/style.css",
	"https://www.example.com/articles/2024/05/some-long-article-title-here?ref=home",
	"https://www.example.com/docs/manual.pdf",
	"https://www.example.com/admin/index.php",
	"https://www.example.com/shop/item?sessionid=abc123&color=red",
	"https://www.example.com/caf%c3%a9/menu",
	"/search?q=robots",
	"/news/today/print",
}

// BenchmarkAllowed measures one verdict for a parsed file, as the check
// worker asks for every URL.
func BenchmarkAllowed(b *testing.B) {
	r, err := robots.Parse(200, []byte(benchFile()))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("typical", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r.Allowed(ourUA, benchPaths[i%len(benchPaths)])
		}
	})
	// Many wildcards against a long path that almost matches: a
	// backtracking matcher takes time in the product of the lengths.
	hostile, err := robots.Parse(200, []byte("User-agent: *\nDisallow: /"+strings.Repeat("a*", 500)+"b\n"))
	if err != nil {
		b.Fatal(err)
	}
	long := "/" + strings.Repeat("a", 2000)
	b.Run("hostile", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !hostile.Allowed(ourUA, long) {
				b.Fatal("no b in the path, yet disallowed")
			}
		}
	})
}

// BenchmarkParse measures parsing a file of the size the cap allows.
func BenchmarkParse(b *testing.B) {
	one := benchFile()
	body := []byte(strings.Repeat(one, robots.MaxBytes/len(one)))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := robots.Parse(200, body)
		if err != nil {
			b.Fatal(err)
		}
		r.Allowed(ourUA, "/x") // selection is part of the first verdict
	}
}
