package robots_test

import "testing"

// rfcCase is one robots.txt with the verdicts RFC 9309 gives for it.
type rfcCase struct {
	name     string
	body     string
	verdicts []verdict
}

func runCases(t *testing.T, cases []rfcCase) {
	t.Helper()
	for _, tc := range cases {
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

// exampleBot is the User-Agent of RFC 9309's ExampleBot, with its product
// token first, as ProductToken expects of our own User-Agent.
const exampleBot = "ExampleBot/0.1 (+https://www.example.com/bot.html)"

// TestRFC9309UserAgent covers §2.2.1 and its three tables.
func TestRFC9309UserAgent(t *testing.T) {
	runCases(t, []rfcCase{
		{
			name: "table 1: the product token names the group, case-insensitively",
			body: "user-agent: ExampleBot\ndisallow: /\n",
			verdicts: []verdict{
				{exampleBot, "/page", false},
				{"examplebot", "/page", false},
				{"EXAMPLEBOT/2", "/page", false},
				{"OtherBot/1.0", "/page", true},
			},
		},
		{
			name: "table 2: two groups for the same token are merged",
			body: "user-agent: ExampleBot\ndisallow: /foo\ndisallow: /bar\n\nuser-agent: ExampleBot\ndisallow: /baz\n",
			verdicts: []verdict{
				{exampleBot, "/foo", false},
				{exampleBot, "/bar", false},
				{exampleBot, "/baz", false},
				{exampleBot, "/qux", true},
			},
		},
		{
			name: "table 3: without a matching group the * group applies",
			body: "user-agent: *\ndisallow: /foo\ndisallow: /bar\n\nuser-agent: BazBot\ndisallow: /baz\n",
			verdicts: []verdict{
				{exampleBot, "/foo", false},
				{exampleBot, "/bar", false},
				{exampleBot, "/baz", true}, // BazBot's group is not ours
				{"BazBot", "/baz", false},
				{"BazBot", "/foo", true}, // BazBot has its own group: * does not apply
			},
		},
		{
			name:     "no matching group and no * group: no rules apply",
			body:     "user-agent: BazBot\ndisallow: /\n",
			verdicts: []verdict{{exampleBot, "/", true}, {exampleBot, "/baz", true}},
		},
		{
			name:     "no groups at all: no rules apply",
			body:     "disallow: /\nallow: /x\n",
			verdicts: []verdict{{exampleBot, "/", true}},
		},
	})
}

// TestRFC9309AllowDisallow covers the rules of §2.2.2 other than the
// encoding table.
func TestRFC9309AllowDisallow(t *testing.T) {
	runCases(t, []rfcCase{
		{
			name: "matching is case-sensitive",
			body: "user-agent: *\ndisallow: /x/\n",
			verdicts: []verdict{
				{exampleBot, "/x/y", false},
				{exampleBot, "/X/y", true},
			},
		},
		{
			name: "matching starts with the first octet of the path",
			body: "user-agent: *\ndisallow: /fish\n",
			verdicts: []verdict{
				{exampleBot, "/fish.html", false},
				{exampleBot, "/catfish", true},
				{exampleBot, "/?id=fish", true},
			},
		},
		{
			name: "the most specific match (most octets) is used",
			body: "user-agent: *\ndisallow: /\nallow: /p\n",
			verdicts: []verdict{
				{exampleBot, "/page", true},
				{exampleBot, "/other", false},
			},
		},
		{
			name:     "equivalent allow and disallow: allow",
			body:     "user-agent: *\ndisallow: /folder\nallow: /folder\n",
			verdicts: []verdict{{exampleBot, "/folder/page", true}},
		},
		{
			name:     "no matching rule: allowed",
			body:     "user-agent: *\ndisallow: /a\n",
			verdicts: []verdict{{exampleBot, "/b", true}},
		},
		{
			name:     "a group without rules allows everything",
			body:     "user-agent: *\ndisallow: /\n\nuser-agent: ExampleBot\n",
			verdicts: []verdict{{exampleBot, "/a", true}, {"OtherBot", "/a", false}},
		},
		{
			name: "/robots.txt is implicitly allowed",
			body: "user-agent: *\ndisallow: /\ndisallow: /robots.txt\n",
			verdicts: []verdict{
				{exampleBot, "/robots.txt", true},
				{exampleBot, "https://www.example.com/robots.txt", true},
				{exampleBot, "/%72obots.txt", true}, // the same URI, r escaped
				{exampleBot, "/robots.txt.bak", false},
			},
		},
		{
			name: "rules before the first user-agent line are ignored",
			body: "allow: /foo/bar/\n\nuser-agent: ExampleBot\ndisallow: /\nallow: /x/\n",
			verdicts: []verdict{
				{exampleBot, "/foo/bar/", false},
				{exampleBot, "/x/y", true},
			},
		},
	})
}

// TestRFC9309EncodingTable covers the "Examples of matching percent-encoded
// URI components" table of §2.2.2. Each row is tried with the rule written
// in both the Path and the Encoded Path column, against the Path to Match.
// A match is seen through "Allow" beating a shorter "Disallow: /".
//
// Row 2 is read as RFC 3986 reads URIs: ":" and "/" in a query and their
// escapes %3A and %2F are different URIs, and which one a site means is
// known only to whoever built the URL. A rule written with the escapes
// matches the escaped URL; a rule written with "https://" matches the URL
// that carries "https://" as it stands, not the escaped one.
func TestRFC9309EncodingTable(t *testing.T) {
	allowOnly := func(rule string) string {
		return "user-agent: *\ndisallow: /\nallow: " + rule + "\n"
	}
	runCases(t, []rfcCase{
		{
			name: "row 1: /foo/bar?baz=quz",
			body: allowOnly("/foo/bar?baz=quz"),
			verdicts: []verdict{
				{exampleBot, "/foo/bar?baz=quz", true},
				{exampleBot, "/foo/bar?baz=qu", false},
			},
		},
		{
			name: "row 2: /foo/bar?baz=https%3A%2F%2Ffoo.bar",
			body: allowOnly("/foo/bar?baz=https%3A%2F%2Ffoo.bar"),
			verdicts: []verdict{
				{exampleBot, "/foo/bar?baz=https%3A%2F%2Ffoo.bar", true},
				{exampleBot, "/foo/bar?baz=https%3a%2f%2ffoo.bar", true}, // hex case does not matter
				{exampleBot, "/foo/bar?baz=https://foo.bar", false},      // a different URI
			},
		},
		{
			name: "row 2: /foo/bar?baz=https://foo.bar as written",
			body: allowOnly("/foo/bar?baz=https://foo.bar"),
			verdicts: []verdict{
				{exampleBot, "/foo/bar?baz=https://foo.bar", true},
				{exampleBot, "https://www.example.com/foo/bar?baz=https://foo.bar", true},
				{exampleBot, "/foo/bar?baz=https%3A%2F%2Ffoo.bar", false},
			},
		},
		{
			name: "row 3: /foo/bar/U+30C4 is /foo/bar/%E3%83%84",
			body: allowOnly("/foo/bar/ツ"),
			verdicts: []verdict{
				{exampleBot, "/foo/bar/%E3%83%84", true},
				{exampleBot, "/foo/bar/%e3%83%84", true},
				{exampleBot, "/foo/bar/ツ", true}, // the URL's octets are encoded too
				{exampleBot, "/foo/bar/%E3%83%85", false},
			},
		},
		{
			name: "row 4: /foo/bar/%E3%83%84",
			body: allowOnly("/foo/bar/%E3%83%84"),
			verdicts: []verdict{
				{exampleBot, "/foo/bar/%E3%83%84", true},
				{exampleBot, "/foo/bar/ツ", true},
			},
		},
		{
			name: "row 5: /foo/bar/%62%61%7A matches /foo/bar/baz",
			body: allowOnly("/foo/bar/%62%61%7A"),
			verdicts: []verdict{
				{exampleBot, "/foo/bar/baz", true},
				{exampleBot, "/foo/bar/%62%61%7A", true},
				{exampleBot, "/foo/bar/%62a%7a", true},
				{exampleBot, "/foo/bar/bay", false},
			},
		},
		{
			name: "row 5 reversed: a plain rule matches the escaped URL",
			body: allowOnly("/foo/bar/baz"),
			verdicts: []verdict{
				{exampleBot, "/foo/bar/%62%61%7A", true},
			},
		},
	})
}

// TestRFC9309SpecialCharacters covers §2.2.3 and both its tables.
func TestRFC9309SpecialCharacters(t *testing.T) {
	runCases(t, []rfcCase{
		{
			name: "# starts a comment, in line or on its own line",
			body: "user-agent: *\n# comment on its own line\ndisallow: /\nallow: / # comment in line\n# disallow: /x\n",
			verdicts: []verdict{
				{exampleBot, "/page", true}, // "allow: /" ties "disallow: /"
				{exampleBot, "/x", true},
			},
		},
		{
			name: "$ designates the end of the match pattern",
			body: "user-agent: *\ndisallow: /\nallow: /this/path/exactly$\n",
			verdicts: []verdict{
				{exampleBot, "/this/path/exactly", true},
				{exampleBot, "/this/path/exactly/", false},
				{exampleBot, "/this/path/exactly?x=1", false},
				{exampleBot, "/this/path/exactl", false},
			},
		},
		{
			name: "* designates 0 or more instances of any character",
			body: "user-agent: *\ndisallow: /\nallow: /this/*/exactly\n",
			verdicts: []verdict{
				{exampleBot, "/this/a/exactly", true},
				{exampleBot, "/this//exactly", true},
				{exampleBot, "/this/a/b/c/exactly", true},
				{exampleBot, "/this/a/exactly/and/more", true}, // still a prefix match
				{exampleBot, "/this/exactly", false},
				{exampleBot, "/that/a/exactly", false},
			},
		},
		{
			name: "percent-encoded pattern /path/file-with-a-%2A.html",
			body: "user-agent: *\ndisallow: /path/file-with-a-%2A.html\n",
			verdicts: []verdict{
				{exampleBot, "https://www.example.com/path/file-with-a-*.html", false},
				{exampleBot, "https://www.example.com/path/file-with-a-%2a.html", false},
				{exampleBot, "https://www.example.com/path/file-with-a-b.html", true}, // %2A is no wildcard
			},
		},
		{
			name: "percent-encoded pattern /path/foo-%24",
			body: "user-agent: *\ndisallow: /path/foo-%24\n",
			verdicts: []verdict{
				{exampleBot, "https://www.example.com/path/foo-$", false},
				{exampleBot, "https://www.example.com/path/foo-%24", false},
				{exampleBot, "https://www.example.com/path/foo-", true}, // %24 is no anchor
			},
		},
	})
}

// TestRFC9309OtherRecords covers §2.2.4.
func TestRFC9309OtherRecords(t *testing.T) {
	runCases(t, []rfcCase{
		{
			name: "a Sitemap record does not terminate a group",
			body: "user-agent: *\ndisallow: /a\nsitemap: https://www.example.com/sitemap.xml\ndisallow: /b\n",
			verdicts: []verdict{
				{exampleBot, "/a", false},
				{exampleBot, "/b", false},
				{exampleBot, "/c", true},
			},
		},
		{
			name: "nor do unknown records between user-agent lines",
			body: "user-agent: OtherBot\nsitemap: https://www.example.com/sitemap.xml\nhost: www.example.com\nuser-agent: ExampleBot\ndisallow: /\n",
			verdicts: []verdict{
				{exampleBot, "/a", false},
				{"OtherBot", "/a", false},
			},
		},
		{
			name: "common misspellings are accepted",
			body: "useragent: ExampleBot\ndissallow: /a\ndisalow: /b\n",
			verdicts: []verdict{
				{exampleBot, "/a", false},
				{exampleBot, "/b", false},
			},
		},
	})
}

// TestRFC9309Examples covers §5.1 and §5.2.
func TestRFC9309Examples(t *testing.T) {
	const simple = `User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
`
	runCases(t, []rfcCase{
		{
			name: "5.1 simple example",
			body: simple,
			verdicts: []verdict{
				// *: /publications/ allowed, /example/ and *.gif disallowed.
				{exampleBot, "/publications/report.html", true},
				{exampleBot, "/example/page.html", false},
				{exampleBot, "/images/logo.gif", false},
				{exampleBot, "/logo.gif", false},
				{exampleBot, "/logo.gif?v=2", true}, // $ anchors before the query
				{exampleBot, "/publications/cover.gif", true},
				{exampleBot, "/other", true},
				// foobot: only two prefixes, the space after the colon optional.
				{"foobot", "/example/page.html", true},
				{"foobot", "/example/allowed.gif", true},
				{"foobot", "/example/other.html", false},
				{"foobot", "/publications/", false},
				{"foobot", "/", false},
				// barbot and bazbot share one group.
				{"barbot", "/example/page.html", false},
				{"bazbot", "/example/page.html", false},
				{"barbot", "/example/other.html", true},
				{"bazbot", "/images/logo.gif", true},
				// quxbot's empty group at the end allows everything.
				{"quxbot", "/example/page.html", true},
				{"quxbot", "/logo.gif", true},
			},
		},
		{
			name: "5.2 longest match",
			body: "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n",
			verdicts: []verdict{
				{"foobot", "/example/page/disallowed.gif", false},
				{"foobot", "/example/page/disallow.gif", true},
				{"foobot", "/example/page/", true},
			},
		},
	})
}
