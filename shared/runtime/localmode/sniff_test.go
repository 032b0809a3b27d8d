package localmode

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf16"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestNotText: a list that is gzip, UTF-16 (with a byte order mark or
// without) or binary is refused once, as a whole, naming what it looks
// like: no line of it is refused on its own, none queued, and the state
// records nothing read (the same state takes the list once decompressed).
// A list in UTF-8, with its BOM or without, is read as before.
func TestNotText(t *testing.T) {
	site := startSite(t, demosite.Options{Hosts: 4})
	text := strings.Join(site.URLs(5), "\n") + "\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(text))
	zw.Close()
	utf16le := func(s string, bom bool) []byte {
		var b []byte
		if bom {
			b = []byte{0xff, 0xfe}
		}
		for _, u := range utf16.Encode([]rune(s)) {
			b = append(b, byte(u), byte(u>>8))
		}
		return b
	}
	for _, c := range []struct {
		name, kind string
		input      []byte
	}{
		{"gzip", "gzip", gz.Bytes()},
		{"UTF-16 with a byte order mark", "UTF-16", utf16le(text, true)},
		{"UTF-16 without one", "UTF-16", utf16le(text, false)},
		{"NUL bytes throughout", "binary", bytes.Repeat([]byte("\x07\x01\x00\x00\x00\x02"), 1000)},
		{"UTF-8 with its byte order mark", "", append([]byte("\xef\xbb\xbf"), text...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var refused atomic.Int64
			opts := Options{
				State: filepath.Join(dir, "s.db"), OutPath: filepath.Join(dir, "out.jsonl"), Addresses: fetch.PrivatePolicy(),
				Params:   map[string]string{"FetchDelay": "50ms"},
				OnReject: func(Rejected) { refused.Add(1) },
			}
			rt := open(t, opts)
			rep, err := rt.Run(context.Background(), RunOptions{Input: &Input{Name: "list", R: bytes.NewReader(c.input)}})
			if c.kind == "" {
				if err != nil || rep.Results != 20 || refused.Load() != 0 {
					t.Fatalf("UTF-8 list: %d results, %d refused, %v; want 20, 0, nil", rep.Results, refused.Load(), err)
				}
				return
			}
			var nt *NotTextError
			if !errors.As(err, &nt) || nt.Kind != c.kind || nt.Name != "list" {
				t.Fatalf("Run: %v, want a NotTextError of kind %s", err, c.kind)
			}
			if n := refused.Load(); n != 0 || rep.Input.Lines != 0 || rep.Expected != 0 {
				t.Errorf("%d lines refused one by one, %d read, %d urls queued; want none", n, rep.Input.Lines, rep.Expected)
			}
			// Nothing recorded: the list, decompressed, is read from its
			// first line under the same name and state.
			if err := rt.Close(); err != nil {
				t.Fatal(err)
			}
			rt = open(t, opts)
			rep, err = rt.Run(context.Background(), RunOptions{Input: &Input{Name: "list", R: strings.NewReader(text)}})
			if err != nil || rep.Input.Skipped != 0 || rep.Results != 20 {
				t.Errorf("the text list after: skipped %d, %d results, %v; want 0, 20, nil", rep.Input.Skipped, rep.Results, err)
			}
		})
	}
}
