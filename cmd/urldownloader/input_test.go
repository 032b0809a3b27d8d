package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
)

// TestInputNotText: a gzip or UTF-16 list is refused once, with the
// command that makes it text (exit 2), not one refusal per line.
func TestInputNotText(t *testing.T) {
	var text strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&text, "http://127.0.0.1:1/p%d\n", i)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(text.String()))
	zw.Close()
	u16 := []byte{0xff, 0xfe}
	for _, u := range utf16.Encode([]rune(text.String())) {
		u16 = append(u16, byte(u), byte(u>>8))
	}
	for _, c := range []struct {
		name, file string
		input      []byte
		want       string
	}{
		{"gzip", "urls.txt.gz", gz.Bytes(), "urldownloader: --urls urls.txt.gz is not UTF-8 text: it looks like gzip data; nothing of it was read\n" +
			"urldownloader: decompress it first: zcat urls.txt.gz | urldownloader --urls - (with the other flags as before)\n"},
		{"UTF-16", "urls.txt", u16, "urldownloader: --urls urls.txt is not UTF-8 text: it looks like UTF-16 text; nothing of it was read\n" +
			"urldownloader: convert it first: iconv -f UTF-16 -t UTF-8 urls.txt | urldownloader --urls - (with the other flags as before)\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			list := filepath.Join(dir, c.file)
			if err := os.WriteFile(list, c.input, 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := runCmd(t, "--urls", list, "--state", filepath.Join(dir, "s.db"), "--out", filepath.Join(dir, "out.jsonl"))
			stderr = strings.ReplaceAll(stderr, dir+"/", "")
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want 2 and\n%s\ngot:\n%s", code, c.want, stderr)
			}
			if n := strings.Count(stderr, "not accepted"); n > 0 {
				t.Errorf("%d lines refused one by one:\n%s", n, stderr)
			}
		})
	}
}

// TestRefusalsSummarised: a list with a fault on every line prints the
// first ten refusals, then how many more; -v prints every one.
func TestRefusalsSummarised(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "urls.txt")
	if err := os.WriteFile(list, bytes.Repeat([]byte("ftp://example.test/x\n"), 500), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, "--urls", list, "--state", filepath.Join(dir, "s.db"), "--out", filepath.Join(dir, "out.jsonl"))
	if n := strings.Count(stderr, "not accepted:"); code != 1 || n != 10 || !strings.Contains(stderr, "urldownloader: ... and 490 more lines refused (-v prints every one)\n") {
		t.Errorf("exit %d, %d refusals printed; want 1, 10 and the 490 more counted:\n%s", code, n, stderr)
	}
	code, _, stderr = runCmd(t, "-v", "--urls", list, "--state", filepath.Join(dir, "v.db"), "--out", filepath.Join(dir, "v.jsonl"))
	if n := strings.Count(stderr, "not accepted:"); code != 1 || n != 500 {
		t.Errorf("-v: exit %d, %d refusals printed; want 1, 500", code, n)
	}
}
