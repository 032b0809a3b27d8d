// Package warctest reads WARC files with the tools of the field, for the
// tests of what the downloader writes: warcio (check, extract) and
// cdxj-indexer, installed pinned into .venv by `make tools`.
package warctest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/internal/proc"
)

// Environment variables that name the tools instead of .venv/bin.
const (
	EnvWarcio      = "WARCIO"
	EnvCDXJIndexer = "CDXJ_INDEXER"
)

func tool(t testing.TB, env, rel string) string {
	t.Helper()
	p, err := proc.FindTool(env, rel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

// Checked is one record as `warcio check -v` reported it.
type Checked struct {
	File    string
	Offset  int64
	ID      string
	Type    string
	Verdict string // "digest pass", or why not
}

// Check runs `warcio check -v` on files and fails the test unless every
// record's digests are present and pass (a revisit's are present but
// warcio checks none). It returns the records in order.
func Check(t testing.TB, files ...string) []Checked {
	t.Helper()
	out := string(run(t, tool(t, EnvWarcio, ".venv/bin/warcio"), append([]string{"check", "-v"}, files...)...))
	var recs []Checked
	file := ""
	for _, line := range strings.Split(out, "\n") {
		trimmed := strings.TrimSpace(line)
		f := strings.Fields(trimmed)
		switch {
		case trimmed == "":
		case !strings.HasPrefix(line, " "):
			file = trimmed
		case len(f) == 5 && f[0] == "offset" && f[2] == "WARC-Record-ID":
			off, _ := strconv.ParseInt(f[1], 10, 64)
			recs = append(recs, Checked{File: file, Offset: off, ID: f[3], Type: f[4]})
		case len(recs) > 0 && recs[len(recs)-1].Verdict == "":
			recs[len(recs)-1].Verdict = trimmed
		default:
			t.Fatalf("warcio check: unexpected line %q in\n%s", line, out)
		}
	}
	for _, r := range recs {
		ok := r.Verdict == "digest pass" || r.Type == "revisit" && r.Verdict == "digest present but not checked (revisit)"
		if !ok {
			t.Fatalf("warcio check: %s record at %d of %s: %q\n%s", r.Type, r.Offset, r.File, r.Verdict, out)
		}
	}
	return recs
}

// Entry is one line of a CDXJ index: the record's URL, time, status,
// payload digest and where its member is.
type Entry struct {
	SURT      string `json:"-"`
	Timestamp string `json:"-"`
	URL       string `json:"url"`
	Mime      string `json:"mime"`
	Status    string `json:"status"`
	Digest    string `json:"digest"`
	Length    string `json:"length"`
	Offset    string `json:"offset"`
	Filename  string `json:"filename"`
}

// IsRequest reports a request record's entry: cdxj-indexer gives it a
// URL but neither a status nor a type.
func (e Entry) IsRequest() bool { return e.URL != "" && e.Status == "" && e.Mime == "" }

// IsInfo reports the warcinfo record's entry.
func (e Entry) IsInfo() bool { return e.Mime == "application/warc-fields" }

// Index runs cdxj-indexer on files and returns its entries, one per
// record of any type.
func Index(t testing.TB, files ...string) []Entry {
	t.Helper()
	// Every record, requests and warcinfo included, in file order.
	out := run(t, tool(t, EnvCDXJIndexer, ".venv/bin/cdxj-indexer"), append([]string{"--records", "all"}, files...)...)
	var entries []Entry
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), " ", 3)
		if len(parts) != 3 {
			t.Fatalf("cdxj line %q: want 3 fields", sc.Text())
		}
		var e Entry
		if err := json.Unmarshal([]byte(parts[2]), &e); err != nil {
			t.Fatalf("cdxj line %q: %v", sc.Text(), err)
		}
		e.SURT, e.Timestamp = parts[0], parts[1]
		entries = append(entries, e)
	}
	return entries
}

// Payload extracts the payload of the record at offset in file with
// `warcio extract --payload` (content and transfer codings undone).
func Payload(t testing.TB, file string, offset int64) []byte {
	t.Helper()
	return run(t, tool(t, EnvWarcio, ".venv/bin/warcio"), "extract", "--payload", file, itoa(offset))
}

// Headers extracts the WARC and HTTP headers of the record at offset.
func Headers(t testing.TB, file string, offset int64) string {
	t.Helper()
	return string(run(t, tool(t, EnvWarcio, ".venv/bin/warcio"), "extract", "--headers", file, itoa(offset)))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
