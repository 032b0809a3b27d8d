package main

import (
	"bufio"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/internal/warctest"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// TestWarcFlag is the acceptance of `make run ARGS="--warc out.warc.gz"`:
// the demo writes a WARC file that warcio checks, with one response
// record per request (the results' pages and each host's robots.txt),
// each result naming its record, whose payload digest is the result's
// sha256; the summary says where the file is.
func TestWarcFlag(t *testing.T) {
	dir := t.TempDir()
	warcPath, outPath := filepath.Join(dir, "out.warc.gz"), filepath.Join(dir, "res.jsonl")
	code, _, stderr := runCmd(t, "--warc", warcPath, "--out", outPath, "--demo-hosts", "2", "--demo-pages", "3", "--param", "FetchDelay=50ms")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	file := filepath.Join(dir, "out-00000.warc.gz")
	if !strings.Contains(stderr, "warc: records in "+file) {
		t.Errorf("the summary does not name %s:\n%s", file, stderr)
	}
	warctest.Check(t, file)
	byOffset := map[string]warctest.Entry{}
	responses := 0
	for _, e := range warctest.Index(t, file) {
		if !e.IsRequest() && !e.IsInfo() {
			byOffset[e.Offset] = e
			responses++
		}
	}
	f, err := os.Open(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var results int
	for sc := bufio.NewScanner(f); sc.Scan(); results++ {
		var r result.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Status != result.StatusFetched || r.Warc == nil || r.Warc.File != file {
			t.Fatalf("%s: %s, record %+v", r.URL, r.Status, r.Warc)
		}
		e := byOffset[strconv.FormatInt(r.Warc.Offset, 10)]
		sum, _ := hex.DecodeString(r.SHA256)
		if want := "sha256:" + base32.StdEncoding.EncodeToString(sum); e.Digest != want || e.URL != r.URL {
			t.Fatalf("%s: index entry %+v at the result's offset, want digest %s", r.URL, e, want)
		}
	}
	// 2 hosts x 3 pages, and each host's robots.txt.
	if results != 6 || responses != results+2 {
		t.Fatalf("%d results, %d response records; want 6 and 8", results, responses)
	}
}

func TestWarcFlagRefused(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--backend", "moto", "--warc", filepath.Join(dir, "x.warc.gz")},
		{"--warc", filepath.Join(dir, "x.warc"), "--demo-hosts", "1"},
	} {
		if code, _, stderr := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2:\n%s", args, code, stderr)
		}
	}
}
