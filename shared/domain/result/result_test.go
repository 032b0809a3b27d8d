package result_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestSetBody(t *testing.T) {
	tests := []struct {
		name     string
		body     []byte
		wantData string
		wantEnc  string
	}{
		{"empty", nil, "", ""},
		{"ASCII", []byte("hello, world\n"), "hello, world\n", ""},
		{"multi-byte UTF-8", []byte("héllo € 😀"), "héllo € 😀", ""},
		{"NUL is valid UTF-8", []byte("a\x00b"), "a\x00b", ""},
		{"HTML", []byte(`<p class="x">a & b</p>`), `<p class="x">a & b</p>`, ""},
		{"invalid UTF-8", []byte{0xff, 0xfe, 0x00}, "//4A", result.EncodingBase64},
		{"truncated rune", []byte("caf\xc3"), base64.StdEncoding.EncodeToString([]byte("caf\xc3")), result.EncodingBase64},
		{"PNG header", []byte("\x89PNG\r\n\x1a\n"), "iVBORw0KGgo=", result.EncodingBase64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Start from stale values: SetBody must replace all four.
			r := result.Result{Data: "stale", Encoding: result.EncodingBase64, Bytes: 99, SHA256: "stale"}
			if tt.wantEnc == result.EncodingBase64 {
				r.Encoding = ""
			}
			r.SetBody(tt.body)
			if r.Data != tt.wantData || r.Encoding != tt.wantEnc {
				t.Errorf("Data %q Encoding %q, want %q %q", r.Data, r.Encoding, tt.wantData, tt.wantEnc)
			}
			if r.Bytes != int64(len(tt.body)) {
				t.Errorf("Bytes = %d, want %d", r.Bytes, len(tt.body))
			}
			if r.SHA256 != sum(tt.body) {
				t.Errorf("SHA256 = %s, want the raw body's %s", r.SHA256, sum(tt.body))
			}
		})
	}
	t.Run("empty body hash", func(t *testing.T) {
		var r result.Result
		r.SetBody(nil)
		if r.SHA256 != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
			t.Errorf("SHA256 of empty body = %s", r.SHA256)
		}
	})
}

func baseResult() result.Result {
	return result.Result{
		ID:          "0123456789abcdef01234567",
		Host:        "example.com",
		URL:         "http://example.com/page",
		Status:      result.StatusFetched,
		HTTPStatus:  200,
		ContentType: "text/html; charset=utf-8",
		FetchedAt:   time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

// marshalRaw is json.Marshal without HTML escaping, as results are sent.
func marshalRaw(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestEncodeFits(t *testing.T) {
	r := baseResult()
	r.SetBody([]byte("<p>small & \"quoted\"</p>"))
	want := marshalRaw(t, r)
	for _, max := range []int{len(want), len(want) + 1, 1 << 20} {
		got, err := result.Encode(r, max)
		if err != nil {
			t.Fatalf("Encode(max %d): %v", max, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Encode(max %d) = %s, want the plain marshal without HTML escapes %s", max, got, want)
		}
	}
}

// TestEncodeDoesNotEscapeHTML: markup travels as it is ('<' stays '<', '&'
// stays '&', in the body and in the envelope) and decodes to the original.
func TestEncodeDoesNotEscapeHTML(t *testing.T) {
	body := `<script>if (a < b && c > d) alert("&amp;");</script>`
	r := baseResult()
	r.URL = "http://example.com/?a=1&b=<2>"
	r.SetBody([]byte(body))
	out, err := result.Encode(r, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
		if bytes.Contains(out, []byte(esc)) {
			t.Errorf("encoded result has %s: %s", esc, out)
		}
	}
	if !bytes.Contains(out, []byte(`"data":"<script>if (a < b && c > d) alert(\"&amp;\");</script>"`)) {
		t.Errorf("body not carried as it is: %s", out)
	}
	var got result.Result
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Data != body || got.URL != r.URL {
		t.Errorf("round trip: data %q url %q, want %q %q", got.Data, got.URL, body, r.URL)
	}
}

// TestEncodeMarkupFitsMore: a body of nothing but '<', '&' and '>' keeps
// (nearly) a byte of body per byte of message, where the HTML-escaped form
// kept one in six; what is kept is an exact prefix of the body.
func TestEncodeMarkupFitsMore(t *testing.T) {
	const max = 20000
	body := bytes.Repeat([]byte("<&>"), 3*max)
	r := baseResult()
	r.SetBody(body)
	out, err := result.Encode(r, max)
	if err != nil {
		t.Fatal(err)
	}
	got := checkEncoded(t, r, out, max)
	envelope := len(out) - len(got.Data)
	if len(got.Data) < max-envelope-8 {
		t.Errorf("kept %d bytes of markup in a %d-byte message (envelope %d): the budget is not spent on the real encoded size", len(got.Data), max, envelope)
	}
	if escapedKeep := (max - envelope) / 6; len(got.Data) < 5*escapedKeep {
		t.Errorf("kept %d bytes, not much more than the %d an HTML-escaping encoder keeps", len(got.Data), escapedKeep)
	}
	if len(out) > max || len(out) < max-8 {
		t.Errorf("encoded %d bytes, want just under %d", len(out), max)
	}
}

// checkEncoded decodes out and checks the promises of Encode: within max,
// valid JSON, Truncated set, Data a valid prefix of the original, Bytes and
// SHA256 unchanged.
func checkEncoded(t *testing.T, orig result.Result, out []byte, max int) result.Result {
	t.Helper()
	if len(out) > max {
		t.Fatalf("encoded %d bytes, over the limit %d", len(out), max)
	}
	var got result.Result
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("encoded result is not JSON: %v\n%s", err, out)
	}
	if !got.Truncated {
		t.Errorf("Truncated not set")
	}
	if got.Bytes != orig.Bytes || got.SHA256 != orig.SHA256 {
		t.Errorf("bytes %d sha256 %s, want the original %d %s", got.Bytes, got.SHA256, orig.Bytes, orig.SHA256)
	}
	if got.ID != orig.ID || got.URL != orig.URL || got.Status != orig.Status || got.Encoding != orig.Encoding {
		t.Errorf("envelope changed: %+v", got)
	}
	if !strings.HasPrefix(orig.Data, got.Data) {
		t.Errorf("data %.40q... is not a prefix of the original", got.Data)
	}
	switch orig.Encoding {
	case result.EncodingBase64:
		if len(got.Data)%4 != 0 {
			t.Errorf("base64 data length %d is not a multiple of 4", len(got.Data))
		}
		if _, err := base64.StdEncoding.DecodeString(got.Data); err != nil {
			t.Errorf("cut base64 does not decode: %v", err)
		}
	default:
		if !utf8.ValidString(got.Data) {
			t.Errorf("cut text is not valid UTF-8")
		}
	}
	return got
}

func TestEncodeTruncates(t *testing.T) {
	binary := make([]byte, 30000)
	for i := range binary {
		binary[i] = byte(i*7 + i/256)
	}
	binary[0] = 0xff // not UTF-8
	tests := []struct {
		name string
		body []byte
	}{
		{"ASCII", bytes.Repeat([]byte("abcdefghij"), 3000)},
		{"two-byte runes", bytes.Repeat([]byte("é"), 15000)},
		{"three-byte runes", bytes.Repeat([]byte("€"), 10000)},
		{"four-byte runes", bytes.Repeat([]byte("😀"), 7500)},
		{"mixed runes", bytes.Repeat([]byte("aé€😀"), 3000)},
		{"angle brackets", bytes.Repeat([]byte("<"), 30000)},
		{"NUL bytes", bytes.Repeat([]byte{0}, 30000)},
		{"quotes", bytes.Repeat([]byte(`"`), 30000)},
		{"line separators", bytes.Repeat([]byte("\u2028"), 10000)},
		{"HTML", bytes.Repeat([]byte("<p class=\"x\">a &amp; b</p>\n"), 1200)},
		{"binary", binary},
	}
	maxes := []int{400, 401, 402, 403, 1000, 4096, 10000, 20000, 30001}
	for _, tt := range tests {
		for _, max := range maxes {
			t.Run(tt.name+"/"+itoa(max), func(t *testing.T) {
				r := baseResult()
				r.SetBody(tt.body)
				full := marshalRaw(t, r)
				if len(full) <= max {
					t.Skipf("body fits in %d bytes", max)
				}
				out, err := result.Encode(r, max)
				if err != nil {
					t.Fatalf("Encode(max %d): %v", max, err)
				}
				checkEncoded(t, r, out, max)
			})
		}
	}
}

// TestEncodeKeepsWhatFits: a truncated result uses its budget. Cutting the
// body to nothing when most of it would fit loses the content for no
// reason; JSON escaping ('"' is 2 bytes, a control character 6) must not make Encode
// throw away far more than it needs to.
func TestEncodeKeepsWhatFits(t *testing.T) {
	const max = 20000
	tests := []struct {
		name string
		body []byte
	}{
		{"ASCII", bytes.Repeat([]byte("abcdefghij"), 5000)},
		{"four-byte runes", bytes.Repeat([]byte("😀"), 12500)},
		{"HTML twice the limit", bytes.Repeat([]byte("<p>hello world</p>\n"), 2*max/19)},
		{"HTML three times the limit", bytes.Repeat([]byte("<div><a href=\"/x\">link</a></div>\n"), 3*max/34)},
		{"angle brackets", bytes.Repeat([]byte("<"), 50000)},
		{"binary", append([]byte{0xff}, bytes.Repeat([]byte{1, 2, 3}, 20000)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := baseResult()
			r.SetBody(tt.body)
			out, err := result.Encode(r, max)
			if err != nil {
				t.Fatal(err)
			}
			got := checkEncoded(t, r, out, max)
			// 64 bytes of slack, the truncated flag, and one escaped rune.
			if len(out) < max-128 {
				t.Errorf("encoded %d of %d bytes, keeping %d bytes of a %d-byte body: far more was cut than needed", len(out), max, len(got.Data), len(tt.body))
			}
		})
	}
}

func TestEncodeEnvelopeTooLarge(t *testing.T) {
	r := baseResult()
	r.Error = strings.Repeat("x", 1000)
	r.SetBody([]byte("body"))
	out, err := result.Encode(r, 500)
	if err == nil {
		t.Fatalf("Encode returned %d bytes over the limit 500: %s", len(out), out)
	}
	if !strings.Contains(err.Error(), r.ID) || !strings.Contains(err.Error(), "500") {
		t.Errorf("error %q does not name the result and the limit", err)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
