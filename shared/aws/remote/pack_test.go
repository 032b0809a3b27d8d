package remote

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

func TestParseLine(t *testing.T) {
	cases := []struct {
		name    string
		no      int64
		line    string
		want    []string // items as sent
		wantErr string
	}{
		{name: "bare URL", no: 3, line: "http://a.example/x", want: []string{`"http://a.example/x"`}},
		{name: "bare URL normalised", no: 3, line: "  HTTP://A.example:80/x#frag  ", want: []string{`"http://a.example/x"`}},
		{name: "BOM on the first line", no: 1, line: "\ufeffhttp://a.example/", want: []string{`"http://a.example/"`}},
		{name: "object", no: 2, line: `{"url": "http://a.example/q?a=1&b=2"}`, want: []string{`"http://a.example/q?a=1&b=2"`}},
		{name: "object with validators", no: 2, line: `{"host": "a.example", "url": "http://a.example/", "etag": "\"v1\""}`,
			want: []string{`{"url":"http://a.example/","etag":"\"v1\""}`}},
		{name: "validators for a redirect target", no: 2, line: `{"url": "http://a.example/old", "etag": "\"v1\"", "validatorsUrl": "HTTP://a.example:80/new"}`,
			want: []string{`{"url":"http://a.example/old","etag":"\"v1\"","validatorsUrl":"http://a.example/new"}`}},
		{name: "validatorsUrl without validators", no: 4, line: `{"url": "http://a.example/old", "validatorsUrl": "http://a.example/new"}`, wantErr: "validatorsUrl is set without etag"},
		{name: "string", no: 2, line: `"https://b.example/p"`, want: []string{`"https://b.example/p"`}},
		{name: "array", no: 2, line: `["http://a.example/1", {"url": "http://b.example/2"}]`, want: []string{`"http://a.example/1"`, `"http://b.example/2"`}},
		{name: "noncharacters SQS refuses travel escaped", no: 2, line: "http://a.example/?q=\uffff", want: []string{`"http://a.example/?q=%EF%BF%BF"`}},
		{name: "blank", no: 2, line: "   ", want: nil},
		{name: "comment", no: 2, line: "# a comment", want: nil},
		{name: "bad scheme", no: 4, line: "ftp://a.example/", wantErr: "scheme must be http or https"},
		{name: "array with one bad item", no: 4, line: `["http://a.example/", "mailto:x@y"]`, wantErr: "item 1:"},
		{name: "host mismatch", no: 4, line: `{"host": "b.example", "url": "http://a.example/"}`, wantErr: "does not match"},
		{name: "broken JSON", no: 4, line: `{"url": `, wantErr: "invalid input"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			items, err := parseLine(c.no, []byte(c.line))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range items {
				got = append(got, string(it.enc))
				if it.line != c.no {
					t.Errorf("item line %d, want %d", it.line, c.no)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("items %q, want %q", got, c.want)
			}
			// Whatever is sent, ingest's parser takes it.
			for _, it := range items {
				if _, bad, err := urlmsg.Parse("x", it.enc); err != nil || len(bad) > 0 {
					t.Errorf("ingest refuses %s: %v %v", it.enc, err, bad)
				}
			}
		})
	}
}

// TestInvalidUTF8NeverReplaced: a raw byte that is not UTF-8 is sent
// percent-encoded (as shared/domain/urlmsg normalises it, which issue 20 point 9
// extends to queries) or refused, never turned into U+FFFD by JSON.
func TestInvalidUTF8NeverReplaced(t *testing.T) {
	for _, line := range []string{"http://a.example/p\xff", "http://a.example/?q=\xff"} {
		items, err := parseLine(2, []byte(line))
		if err != nil {
			if !strings.Contains(err.Error(), "UTF-8") {
				t.Errorf("%q refused with %v, want the reason to say UTF-8", line, err)
			}
			continue
		}
		for _, it := range items {
			if strings.Contains(string(it.enc), "\ufffd") || strings.ContainsRune(string(it.enc), '\ufffd') || !strings.Contains(string(it.enc), "%FF") {
				t.Errorf("%q sent as %s", line, it.enc)
			}
		}
	}
}

// items makes n URLs over hosts, interleaved as a careless list has them.
func testItems(t *testing.T, n, hosts int) []item {
	t.Helper()
	var out []item
	for i := range n {
		line := fmt.Sprintf("http://h%d.example/page/%d", i%hosts, i)
		its, err := parseLine(int64(i+1), []byte(line))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, its...)
	}
	return out
}

func TestPackGroupsHostsWithinLimits(t *testing.T) {
	items := testItems(t, 5000, 7)
	const limit = 8 << 10
	msgs := pack(items, limit)
	seen := map[string]int{}
	lastHost := ""
	hostRuns := map[string]int{} // runs of a host over the message sequence
	for _, m := range msgs {
		if len(m.body) > limit {
			t.Fatalf("message of %d bytes, limit %d", len(m.body), limit)
		}
		good, bad, err := urlmsg.Parse("m", m.body)
		if err != nil || len(bad) > 0 {
			t.Fatalf("ingest refuses a message: %v %v", err, bad)
		}
		if len(good) != m.urls || m.urls > urlmsg.MaxItems {
			t.Fatalf("message carries %d URLs, says %d", len(good), m.urls)
		}
		for _, g := range good {
			seen[g.URL]++
			if g.Host != lastHost {
				hostRuns[g.Host]++
				lastHost = g.Host
			}
		}
	}
	if len(seen) != len(items) {
		t.Fatalf("%d distinct URLs packed, want %d", len(seen), len(items))
	}
	for u, n := range seen {
		if n != 1 {
			t.Fatalf("%s packed %d times", u, n)
		}
	}
	for h, runs := range hostRuns {
		if runs != 1 {
			t.Errorf("host %s's URLs are in %d separate runs, want them together", h, runs)
		}
	}
	// Full messages: all but the last are at least 90% of the limit.
	for _, m := range msgs[:len(msgs)-1] {
		if len(m.body) < limit*9/10 {
			t.Errorf("a message of %d bytes before the last: packing leaves room", len(m.body))
		}
	}
}

func TestPackKeepsLineOrderWithinAHostAndIsDeterministic(t *testing.T) {
	items := testItems(t, 300, 3)
	a, b := pack(items, 4<<10), pack(items, 4<<10)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("two packings of one window differ: a resumed run could not skip what was sent")
	}
	var urls []string
	for _, m := range a {
		var arr []string
		if err := json.Unmarshal(m.body, &arr); err != nil {
			t.Fatal(err)
		}
		urls = append(urls, arr...)
	}
	if urls[0] != "http://h0.example/page/0" || urls[1] != "http://h0.example/page/3" {
		t.Errorf("first URLs %q, want h0's in line order", urls[:2])
	}
}

func TestPackCapsItemsPerMessage(t *testing.T) {
	msgs := pack(testItems(t, 2500, 1), 1<<20)
	if len(msgs) != 3 || msgs[0].urls != urlmsg.MaxItems || msgs[2].urls != 500 {
		t.Fatalf("%d messages, first %d URLs: want 1000, 1000, 500", len(msgs), msgs[0].urls)
	}
}

func TestBatches(t *testing.T) {
	var msgs []message
	for i := range 25 {
		msgs = append(msgs, message{body: make([]byte, 100+i)})
	}
	t.Run("ten at most", func(t *testing.T) {
		got := batches(msgs, nil, 1<<20)
		if len(got) != 3 || len(got[0]) != 10 || len(got[2]) != 5 {
			t.Fatalf("batches %v", got)
		}
	})
	t.Run("bytes at most", func(t *testing.T) {
		for _, b := range batches(msgs, nil, 300) {
			size := 0
			for _, i := range b {
				size += len(msgs[i].body)
			}
			if size > 300 || len(b) > 2 {
				t.Fatalf("batch %v of %d bytes", b, size)
			}
		}
	})
	t.Run("sent ones skipped", func(t *testing.T) {
		got := batches(msgs, map[int]bool{0: true, 11: true}, 1<<20)
		n := 0
		for _, b := range got {
			for _, i := range b {
				if i == 0 || i == 11 {
					t.Fatalf("sent message %d batched again", i)
				}
				n++
			}
		}
		if n != 23 {
			t.Fatalf("%d messages batched, want 23", n)
		}
	})
}

func TestRecentForgetsTheOldest(t *testing.T) {
	r := newRecent(3)
	for _, id := range []string{"a", "b", "c", "a", "d"} {
		r.add(id)
	}
	if r.has("a") || !r.has("b") || !r.has("c") || !r.has("d") {
		t.Fatalf("after a b c a d with room for 3: a=%v b=%v c=%v d=%v", r.has("a"), r.has("b"), r.has("c"), r.has("d"))
	}
}

func TestRepairRemovesOnlyAnIncompleteLastLine(t *testing.T) {
	long := strings.Repeat("x", 3<<20) // longer than a read-back step
	cases := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"complete", "{\"id\":\"a\"}\n{\"id\":\"b\"}\n", "{\"id\":\"a\"}\n{\"id\":\"b\"}\n"},
		{"cut", "{\"id\":\"a\"}\n{\"id\":\"b", "{\"id\":\"a\"}\n"},
		{"cut, long", "{\"id\":\"a\"}\n{\"data\":\"" + long, "{\"id\":\"a\"}\n"},
		{"one cut line", "{\"id\":\"a", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := t.TempDir() + "/out.jsonl"
			os.WriteFile(path, []byte(c.in), 0o644)
			r := &receiver{o: ReceiveOptions{Out: path}, recent: newRecent(10)}
			f, err := r.openOut()
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			got, _ := os.ReadFile(path)
			if string(got) != c.want {
				t.Fatalf("file holds %d bytes %.40q, want %.40q", len(got), got, c.want)
			}
			if strings.Contains(c.want, `"a"`) && !r.recent.has("a") {
				t.Error("id a not remembered from the file")
			}
		})
	}
}
