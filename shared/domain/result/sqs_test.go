package result_test

import (
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/warc"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// sqsValid reports whether r may appear in an SQS message: #x9 | #xA | #xD
// | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF (SendMessage, "Message
// body", in the SQS API reference).
func sqsValid(r rune) bool {
	switch {
	case r == 0x9 || r == 0xA || r == 0xD:
		return true
	case r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}

// TestEncodeIsSQSValid: whatever a page, a server's headers or an error
// hold (the noncharacters U+FFFE and U+FFFF, control characters, invalid
// UTF-8), every character of the encoded result is one SQS accepts, and a
// consumer decoding the JSON reads the body back byte for byte, in every
// packing, and the texts as they were (an invalid byte as U+FFFD).
func TestEncodeIsSQSValid(t *testing.T) {
	const nasty = "a\ufffeb\uffffc\x00\x01\x1f\x7f\u2028\ud7ff\ue000\ufffd🙂"
	bodies := map[string][]byte{
		"noncharacters":  []byte("<p>" + nasty + "</p>"),
		"only U+FFFF":    []byte("\uffff"),
		"invalid UTF-8":  []byte("x\xff\xfe\xed\xa0\x80y\uffff"), // a lone surrogate's encoding among them
		"lone surrogate": []byte("\xed\xbf\xbf"),
	}
	texts := map[string]string{
		"noncharacters": nasty,
		"invalid UTF-8": "e\xed\xa0\x80\xff" + nasty,
	}
	for bname, b := range bodies {
		for _, enc := range []params.BodyEncoding{params.BodyPlain, params.BodyGzip} {
			for tname, text := range texts {
				r := result.Result{ID: "id" + text, Host: "h.example", URL: "http://h.example/" + text, Status: result.StatusFetched,
					HTTPStatus: 200, ContentType: text, FetchedAt: time.Unix(1, 0).UTC(), Location: text, ETag: `"` + text + `"`,
					LastModified: text, ValidatorsURL: text, Error: text,
					Warc: &warc.Ref{Key: "w/" + text, Offset: 1, Length: 2}}
				r.SetInline(b, result.Pack(b, enc))
				msg, err := result.Encode(r, 256<<10)
				if err != nil {
					t.Fatal(err)
				}
				name := bname + "/" + string(enc) + "/" + tname
				if !utf8.Valid(msg) {
					t.Fatalf("%s: message is not UTF-8: %q", name, msg)
				}
				for i, c := range string(msg) {
					if !sqsValid(c) {
						t.Fatalf("%s: byte %d is %U, which SQS refuses: %q", name, i, c, msg)
					}
				}
				var got result.Result
				if err := json.Unmarshal(msg, &got); err != nil {
					t.Fatalf("%s: decode: %v", name, err)
				}
				want := []byte(text)
				want = []byte(string([]rune(string(want)))) // an invalid byte reads back as U+FFFD
				for field, v := range map[string]string{"error": got.Error, "location": got.Location, "etag": got.ETag[1 : len(got.ETag)-1],
					"contentType": got.ContentType, "lastModified": got.LastModified, "validatorsUrl": got.ValidatorsURL, "warc key": got.Warc.Key[2:]} {
					if v != string(want) {
						t.Errorf("%s: %s reads back %q, want %q", name, field, v, want)
					}
				}
				whole, err := wholebody.Reader{}.ReadAll(t.Context(), got)
				if err != nil {
					t.Fatalf("%s: read body: %v", name, err)
				}
				if string(whole) != string(b) {
					t.Errorf("%s: body reads back %q, want %q", name, whole, b)
				}
			}
		}
	}
}

// TestEncodeNestedRefsAreSQSValid: the refs encoding/json writes (body and
// WARC) escape U+FFFE and U+FFFF too.
func TestEncodeNestedRefsAreSQSValid(t *testing.T) {
	r := result.Result{ID: "x", Status: result.StatusFetched, FetchedAt: time.Unix(1, 0).UTC()}
	r.SetStored(body.Ref{Bucket: "b", Key: "k\ufffe\uffff", ContentType: "t\uffff"})
	msg, err := result.Encode(r, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range string(msg) {
		if !sqsValid(c) {
			t.Fatalf("%U in %q, which SQS refuses", c, msg)
		}
	}
	var got result.Result
	if err := json.Unmarshal(msg, &got); err != nil || got.Body.Key != "k\ufffe\uffff" || got.Body.ContentType != "t\uffff" {
		t.Fatalf("decoded %+v, %v; want the key and type back", got.Body, err)
	}
}
