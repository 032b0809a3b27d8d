package localmode

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/internal/schematest"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// TestGzipResults: local mode takes ResultBodyEncoding=gzip as a --param
// (Options.Params) and packs results as the check function does: the
// page that compresses rides as gzip+base64 and reads back as the body
// its bytes and sha256 describe, a tiny one stays text; every line is
// valid against docs/schema/result.schema.json, and an encoding the
// schema does not name is not.
func TestGzipResults(t *testing.T) {
	site := warcSite(t)
	dir := t.TempDir()
	opts := Options{
		State: filepath.Join(dir, "state.db"), OutPath: filepath.Join(dir, "out.jsonl"),
		Addresses: fetch.PrivatePolicy(),
		Params:    map[string]string{"FetchDelay": "20ms", "ResultBodyEncoding": "gzip"},
	}
	h := site.Hosts()[0]
	got := runWarcJob(t, opts, jsonLines([]string{"http://" + h + "/gz", "http://" + h + "/same"}))
	want := bytes.Repeat([]byte("<p>compressed</p>\n"), 100)
	for _, r := range got {
		body, err := wholebody.Reader{}.ReadAll(t.Context(), r)
		if err != nil {
			t.Fatalf("%s: %v", r.URL, err)
		}
		switch {
		case strings.HasSuffix(r.URL, "/gz"):
			if r.Encoding != result.EncodingGzipBase64 || len(r.Data) >= len(want)/4 || !bytes.Equal(body, want) {
				t.Errorf("/gz: encoding %q, %d bytes of data, read back %d bytes; want gzip+base64, a fraction of the %d-byte page", r.Encoding, len(r.Data), len(body), len(want))
			}
		case strings.HasSuffix(r.URL, "/same"):
			if r.Encoding != "" || r.Data != "v1" {
				t.Errorf("/same: encoding %q data %q, want the 2-byte body as text", r.Encoding, r.Data)
			}
		}
	}
	raw, err := os.ReadFile(opts.OutPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	gzipLine := ""
	for _, l := range lines {
		if bytes.Contains(l, []byte(`"encoding":"gzip+base64"`)) {
			gzipLine = string(l)
		}
	}
	if gzipLine == "" {
		t.Fatalf("no line with gzip+base64 data in %s", raw)
	}
	unknown := []byte(strings.Replace(gzipLine, `"gzip+base64"`, `"gzip"`, 1))
	for i, errs := range schematest.Validate(t, schematest.Path(t, "result.schema.json"), append(lines, unknown)) {
		if i < len(lines) && len(errs) > 0 {
			t.Errorf("result %s is not valid: %v", lines[i], errs)
		}
		if i == len(lines) && len(errs) == 0 {
			t.Errorf("encoding \"gzip\" passed the schema: %s", unknown)
		}
	}
}
