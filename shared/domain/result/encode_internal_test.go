package result

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// TestJSONLenMatchesEncoder holds jsonLen to what the encoder really spends
// on each rune (HTML escaping off), so fitData's budget is the real size:
// every rune below U+3000, a stride through the rest, the runes encoding/json
// treats specially, and invalid bytes.
func TestJSONLenMatchesEncoder(t *testing.T) {
	var runes []rune
	for r := rune(0); r < 0x3000; r++ {
		runes = append(runes, r)
	}
	for r := rune(0x3000); r <= utf8.MaxRune; r += 101 {
		runes = append(runes, r)
	}
	runes = append(runes, '\u2028', '\u2029', utf8.RuneError, 0xD800, 0xDFFF, 0xFFFE, utf8.MaxRune)
	enc := func(s string) int {
		var buf bytes.Buffer
		e := json.NewEncoder(&buf)
		e.SetEscapeHTML(false)
		if err := e.Encode(s); err != nil {
			t.Fatal(err)
		}
		// The encoder with the escapes marshal adds for SQS.
		return len(escapeNonCharacters(buf.Bytes())) - len(`""`+"\n")
	}
	for _, r := range runes {
		s := string(r)
		got, size := utf8.DecodeRuneInString(s)
		if n, want := jsonLen(got, size), enc(s); n != want {
			t.Errorf("jsonLen(%U) = %d, the encoder writes %d bytes", r, n, want)
		}
	}
	for _, b := range []byte{0x80, 0xbf, 0xc0, 0xff} {
		s := string([]byte{b})
		r, size := utf8.DecodeRuneInString(s)
		if n, want := jsonLen(r, size), enc(s); n != want {
			t.Errorf("jsonLen(invalid byte %#x) = %d, the encoder writes %d bytes", b, n, want)
		}
	}
}

// TestInlineSize: what a body costs in the data field, as marshal writes
// it: text with its escapes, anything else as base64.
func TestInlineSize(t *testing.T) {
	for _, body := range [][]byte{[]byte("plain <html> & text"), []byte("quotes \" and \\ and \n\t"), []byte("ctrl \x01\x02 \u2028"), []byte("héllo €"), {0xff, 0xfe, 0x00}} {
		r := Result{}
		r.SetBody(body)
		b, err := marshal(Result{Data: r.Data})
		if err != nil {
			t.Fatal(err)
		}
		empty, _ := marshal(Result{})
		want := int64(len(b) - len(empty) - len(`,"data":""`))
		if got := InlineSize(body); got != want {
			t.Errorf("InlineSize(%q) = %d, the message spends %d", body, got, want)
		}
	}
}
