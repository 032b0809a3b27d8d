package urlmsg

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeObject: decodeObject's fast path (exactFields, then one
// Unmarshal) agrees with the token walk that decides every other case.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{
		`{"url":"http://example.com/","etag":"\"e\""}`,
		`{"url":"a","url":"b"}`,
		`{"\u0075rl":"a"}`,
		`{"URL":"a"}`,
		`{"etag":"a,{\"b\":[1]}","url":"x"}`,
		`{"meta":{"url":"x"},"url":"y"}`,
		`{"host":null,"url":"x","lastModified":"y"}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var probe map[string]json.RawMessage
		if json.Unmarshal(b, &probe) != nil {
			return // decodeObject only sees valid objects
		}
		fast, fastErr := decodeObject(b)
		slow, slowErr := walkObject(b)
		if (fastErr == nil) != (slowErr == nil) || fast != slow {
			t.Fatalf("decodeObject(%s) = %+v, %v; the token walk says %+v, %v", b, fast, fastErr, slow, slowErr)
		}
	})
}
