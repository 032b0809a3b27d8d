package localmode

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/warctest"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// warcSite serves pages, a gzip-encoded page, a same-host redirect, a
// page that answers 304 to its ETag, and one longer than the body cap.
func warcSite(t *testing.T) *demosite.Site {
	t.Helper()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bytes.Repeat([]byte("<p>compressed</p>\n"), 100))
	zw.Close()
	return startSite(t, demosite.Options{Hosts: 2, Robots: "User-agent: *\nDisallow: /private\n",
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/gz":
				w.Header().Set("Content-Encoding", "gzip")
				w.Header().Set("Content-Type", "text/html")
				w.Write(gz.Bytes())
			case r.URL.Path == "/moved":
				http.Redirect(w, r, "/page/0", http.StatusFound)
			case r.URL.Path == "/same":
				if r.Header.Get("If-None-Match") == `"v1"` {
					w.WriteHeader(http.StatusNotModified)
					return
				}
				w.Header().Set("ETag", `"v1"`)
				w.Write([]byte("v1"))
			case r.URL.Path == "/missing":
				http.NotFound(w, r)
			case r.URL.Path == "/binary":
				w.Write([]byte{0xff, 0xfe, 0, 1, 2})
			case r.URL.Path == "/big":
				w.Write(bytes.Repeat([]byte("big "), 10_000))
			default:
				w.Write([]byte("page " + r.URL.Path))
			}
		})})
}

func warcInput(site *demosite.Site) []string {
	var lines []string
	for _, h := range site.Hosts() {
		for _, p := range []string{"/page/0", "/page/1", "/gz", "/moved", "/big", "/private/x"} {
			lines = append(lines, jsonLines([]string{"http://" + h + p})...)
		}
		b, _ := json.Marshal(map[string]string{"url": "http://" + h + "/same", "etag": `"v1"`})
		lines = append(lines, string(b))
	}
	return lines
}

func runWarcJob(t *testing.T, opts Options, lines []string) []result.Result {
	t.Helper()
	rt := open(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := rt.Run(ctx, RunOptions{Input: fileInput(t, writeLines(t, lines))})
	if err != nil || len(rep.Missing) > 0 {
		t.Fatalf("run: %v, %d missing", err, len(rep.Missing))
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	return readResults(t, opts.OutPath)
}

// TestWarcOutput: with Options.Warc every request made (robots.txt and
// the redirect's hop included) is a request and a response record that
// warcio checks; every result that came from an answer names its record,
// whose payload warcio extracts as the result's body (sha256 alike);
// not_modified names its revisit record; a denied URL names none.
func TestWarcOutput(t *testing.T) {
	site := warcSite(t)
	dir := t.TempDir()
	opts := Options{
		State: filepath.Join(dir, "state.db"), OutPath: filepath.Join(dir, "out.jsonl"), Warc: filepath.Join(dir, "crawl.warc.gz"),
		Addresses: fetch.PrivatePolicy(), Params: map[string]string{"FetchDelay": "20ms", "MaxBodyBytes": "20000"},
	}
	results := runWarcJob(t, opts, warcInput(site))
	file := filepath.Join(dir, "crawl-00000.warc.gz")
	checked := warctest.Check(t, file)
	entries := warctest.Index(t, file)
	byOffset := map[string]warctest.Entry{}
	answers := 0
	for _, e := range entries {
		byOffset[e.Offset] = e
		if !e.IsRequest() && !e.IsInfo() {
			answers++
		}
	}
	if reqs := len(site.Requests()); answers != reqs || len(checked) != 1+2*reqs {
		t.Fatalf("%d answers and %d records in the WARC file for %d requests the site saw", answers, len(checked), reqs)
	}
	var fetched, notModified, denied int
	for _, r := range results {
		if r.Status == result.StatusDenied {
			denied++
			if r.Warc != nil {
				t.Errorf("%s: denied by robots.txt, yet a record %+v", r.URL, r.Warc)
			}
			continue
		}
		if r.Warc == nil || r.Warc.File != file {
			t.Errorf("%s (%s): record %+v, want one in %s", r.URL, r.Status, r.Warc, file)
			continue
		}
		e, ok := byOffset[strconv.FormatInt(r.Warc.Offset, 10)]
		if !ok || e.Length != strconv.FormatInt(r.Warc.Length, 10) || e.Status != strconv.Itoa(r.HTTPStatus) {
			t.Errorf("%s: ref %+v, index entry %+v (status %d)", r.URL, *r.Warc, e, r.HTTPStatus)
			continue
		}
		switch r.Status {
		case result.StatusNotModified:
			notModified++
			if e.Mime != "warc/revisit" {
				t.Errorf("%s: not_modified names a %q record", r.URL, e.Mime)
			}
		case result.StatusFetched:
			fetched++
			payload := warctest.Payload(t, file, r.Warc.Offset)
			if r.Truncated {
				// The record holds what was transferred: at least the cut
				// body, marked as cut.
				if int64(len(payload)) < r.Bytes || !strings.Contains(warctest.Headers(t, file, r.Warc.Offset), "WARC-Truncated: length") {
					t.Errorf("%s: cut at %d, record of %d bytes without WARC-Truncated", r.URL, r.Bytes, len(payload))
				}
				continue
			}
			sum := sha256.Sum256(payload)
			if hex.EncodeToString(sum[:]) != r.SHA256 {
				t.Errorf("%s: record payload's sha256 is not the result's", r.URL)
			}
		}
	}
	// Per host: 2 pages, gz, the redirect (ends on /page/0), big: 5
	// fetched; /same not modified; /private denied.
	if fetched != 10 || notModified != 2 || denied != 2 {
		t.Fatalf("%d fetched, %d not modified, %d denied; want 10, 2, 2", fetched, notModified, denied)
	}
	// The robots.txt fetches and the redirect's first hop are records too.
	var robots, moved int
	for _, e := range entries {
		switch {
		case e.IsRequest() || e.IsInfo():
		case strings.HasSuffix(e.URL, "/robots.txt"):
			robots++
		case strings.HasSuffix(e.URL, "/moved") && e.Status == "302":
			moved++
		}
	}
	if robots != 2 || moved != 2 {
		t.Fatalf("%d robots.txt and %d redirect records, want 2 each", robots, moved)
	}
}

// TestWarcResume: a job resumed after a crash (which may leave half a
// record at the end of its file) writes the next file of the sequence;
// the records the first run's results name still read.
func TestWarcResume(t *testing.T) {
	site := startSite(t, demosite.Options{Hosts: 1})
	dir := t.TempDir()
	opts := Options{
		State: filepath.Join(dir, "state.db"), OutPath: filepath.Join(dir, "out.jsonl"), Warc: filepath.Join(dir, "job.warc.gz"),
		Addresses: fetch.PrivatePolicy(), Params: map[string]string{"FetchDelay": "20ms"},
	}
	h := site.Hosts()[0]
	first := runWarcJob(t, opts, jsonLines([]string{site.URL(h, 0), site.URL(h, 1)}))
	f0 := filepath.Join(dir, "job-00000.warc.gz")
	// The crash's partial member.
	data, err := os.ReadFile(f0)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(f0, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(data[:len(data)/3])
	f.Close()

	// A list that starts otherwise (one that starts as the first would
	// be the first, extended: only its new lines would be read).
	all := runWarcJob(t, opts, jsonLines([]string{site.URL(h, 2), site.URL(h, 0), site.URL(h, 1)}))
	f1 := filepath.Join(dir, "job-00001.warc.gz")
	warctest.Check(t, f1)
	// The results file goes on: the first run's two, then the second's three.
	if len(all) != 5 {
		t.Fatalf("%d results, want 5", len(all))
	}
	for i, r := range all {
		want := f0
		if i >= len(first) {
			want = f1
		}
		if r.Warc == nil || r.Warc.File != want {
			t.Fatalf("result %d (%s): record %+v, want one in %s", i, r.URL, r.Warc, want)
		}
		if got := string(warctest.Payload(t, r.Warc.File, r.Warc.Offset)); got != r.Data {
			t.Fatalf("%s: record payload %q, result data %q", r.URL, got, r.Data)
		}
	}
}
