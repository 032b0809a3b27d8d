package result

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/web/warc"
)

// TestMarshalMatchesEncodingJSON holds the hand-written marshal to
// encoding/json (HTML escaping off, U+FFFE and U+FFFF escaped) byte for
// byte: every field empty and
// set, strings over every escape class (quotes, backslashes, control
// characters, U+2028/U+2029, invalid UTF-8, markup, multibyte runes),
// nested refs, and times in other zones and with nanoseconds.
func TestMarshalMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"", "a", "plain text", `"`, `\`, "\b\f\n\r\t", "\x00\x01\x1f\x7f", "\u2028\u2029", "<a href=\"x\">&amp;</a>",
		"\xff", "\xc3", "é", "日本語", "🙂", "\ud7ff", "\ufffe", "\uffff", string(utf8.RuneError), "http://h.example/p?q=1&r=2#f"}
	str := func() string {
		var b bytes.Buffer
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+30*60), time.FixedZone("y", -7*3600)}
	for i := range 5000 {
		r := Result{
			ID: str(), Host: str(), URL: str(), Status: Status(str()),
			ContentType: str(), ContentEncoding: str(), Data: str(), Encoding: str(),
			SHA256: str(), Location: str(), ETag: str(), LastModified: str(), ValidatorsURL: str(), Error: str(),
		}
		if rng.IntN(2) == 0 {
			r.HTTPStatus = rng.IntN(600) - 50
			r.Bytes = rng.Int64() - rng.Int64()
			r.Attempts = rng.IntN(5)
			r.Truncated = true
		}
		if rng.IntN(2) == 0 {
			r.FetchedAt = time.Unix(rng.Int64N(1<<34), rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])
		}
		if rng.IntN(4) == 0 {
			r.Body = &body.Ref{Bucket: str(), Key: str(), Path: str(), Bytes: rng.Int64N(1 << 40), SHA256: str(), ContentType: str()}
		}
		if rng.IntN(3) == 0 {
			changed := rng.IntN(2) == 0
			r.Changed, r.Seq, r.Final = &changed, rng.IntN(4), rng.IntN(2) == 0
		}
		if rng.IntN(4) == 0 {
			r.Warc = &warc.Ref{File: str(), Bucket: str(), Key: str(), Offset: rng.Int64N(1 << 40), Length: rng.Int64N(1 << 20)}
		}
		got, err := marshal(r)
		if err != nil {
			t.Fatalf("result %d: %v", i, err)
		}
		want, err := marshalReflect(r)
		if err != nil {
			t.Fatalf("result %d through encoding/json: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("result %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestMarshalRefusesWhatEncodingJSONRefuses: a time outside JSON's years
// is an error, as encoding/json makes it.
func TestMarshalRefusesWhatEncodingJSONRefuses(t *testing.T) {
	r := Result{ID: "x", FetchedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := marshal(r); err == nil {
		t.Fatal("a fetchedAt in the year 10000 encoded, want an error")
	}
}

func BenchmarkMarshal(b *testing.B) {
	r := Result{ID: "00652cf497ace1890aa80884", Host: "127.0.0.2:33679", URL: "http://127.0.0.2:33679/page/1", Status: "fetched",
		HTTPStatus: 200, ContentType: "text/plain; charset=utf-8", Data: "demo page 127.0.0.2:33679/page/1\n", Bytes: 33,
		SHA256: "3877ba72d8fa7a0839f725404c31fff1eaba0f1569eb47c6711b1511acaae54c", FetchedAt: time.Now(), Attempts: 1}
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			_, _ = marshal(r)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = marshalReflect(r)
		}
	})
}
