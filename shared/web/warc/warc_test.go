package warc_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"io"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/warctest"
	"github.com/urldownloader/urldownloader/shared/web/warc"
)

var date = time.Date(2026, 12, 1, 18, 30, 0, 123456000, time.UTC)

func create(t *testing.T, opts warc.Options) *warc.Writer {
	t.Helper()
	if opts.Path == "" {
		opts.Path = filepath.Join(t.TempDir(), "out.warc.gz")
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return date }
	}
	w, err := warc.Create(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func exchange(t *testing.T, url string, payload []byte) *warc.Exchange {
	t.Helper()
	p := warc.NewPayload()
	if _, err := p.Write(payload); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &warc.Exchange{
		URL: url, Date: date, RemoteIP: "127.0.0.1", Protocol: "http/1.1",
		Request:  []byte("GET " + strings.TrimPrefix(url, "http://a.test") + " HTTP/1.1\r\nHost: a.test\r\nUser-Agent: t/1\r\n\r\n"),
		Response: []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: text/plain\r\n\r\n", len(payload))),
		Payload:  p,
	}
}

// member reads the record at ref with nothing but Go's gzip: the range
// must be exactly one member holding one record.
type parsed struct {
	fields textproto.MIMEHeader
	block  []byte
}

func readRecord(t *testing.T, ref warc.Ref) parsed {
	t.Helper()
	data, err := os.ReadFile(ref.File)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Offset+ref.Length > int64(len(data)) {
		t.Fatalf("ref %+v past the end of a %d-byte file", ref, len(data))
	}
	zr, err := gzip.NewReader(bytes.NewReader(data[ref.Offset : ref.Offset+ref.Length]))
	if err != nil {
		t.Fatalf("member at %d: %v", ref.Offset, err)
	}
	zr.Multistream(false)
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("member at %d: %v", ref.Offset, err)
	}
	br := bufio.NewReader(bytes.NewReader(raw))
	tp := textproto.NewReader(br)
	if line, _ := tp.ReadLine(); line != "WARC/1.1" {
		t.Fatalf("record at %d starts %q", ref.Offset, line)
	}
	fields, err := tp.ReadMIMEHeader()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(fields.Get("Content-Length"))
	block := make([]byte, n)
	if _, err := io.ReadFull(br, block); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "\r\n\r\n" {
		t.Fatalf("record at %d ends %q after its block", ref.Offset, rest)
	}
	return parsed{fields, block}
}

func b32sha256(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + base32.StdEncoding.EncodeToString(sum[:])
}

// TestExchangeRecords: an exchange is a request and a response record
// naming each other, the response where the Ref says, with its digests,
// and warcio, cdxj-indexer and Go's gzip all read it so.
func TestExchangeRecords(t *testing.T) {
	w := create(t, warc.Options{Info: [][2]string{{"software", "urldownloader/test"}, {"fetchDelay", "1s"}}})
	payload := []byte("hello, archive\n")
	ex := exchange(t, "http://a.test/page", payload)
	ref, err := w.Exchange(context.Background(), ex)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(filepath.Dir(ref.File), "out-00000.warc.gz"); ref.File != want {
		t.Fatalf("file %s, want %s", ref.File, want)
	}
	rec := readRecord(t, ref)
	if got := rec.fields.Get("WARC-Type"); got != "response" {
		t.Fatalf("type %s", got)
	}
	wantBlock := append(append([]byte(nil), ex.Response...), payload...)
	if !bytes.Equal(rec.block, wantBlock) {
		t.Fatalf("block %q, want %q", rec.block, wantBlock)
	}
	for k, want := range map[string]string{
		"WARC-Target-URI": "http://a.test/page", "WARC-IP-Address": "127.0.0.1",
		"WARC-Date": "2026-12-01T18:30:00.123456Z", "WARC-Payload-Digest": b32sha256(payload),
		"WARC-Block-Digest": b32sha256(wantBlock), "Content-Type": "application/http;msgtype=response",
		"WARC-Protocol": "http/1.1",
	} {
		if got := rec.fields.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if rec.fields.Get("WARC-Truncated") != "" {
		t.Error("a whole payload is marked truncated")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	checked := warctest.Check(t, ref.File)
	if len(checked) != 3 || checked[0].Type != "warcinfo" || checked[1].Type != "request" || checked[2].Type != "response" ||
		checked[2].Offset != ref.Offset {
		t.Fatalf("warcio check saw %+v, want warcinfo, request, response at %d", checked, ref.Offset)
	}
	entries := warctest.Index(t, ref.File)
	var resp, req *warctest.Entry
	for i, e := range entries {
		switch {
		case e.IsRequest():
			req = &entries[i]
		case !e.IsInfo():
			resp = &entries[i]
		}
	}
	if resp == nil || req == nil {
		t.Fatalf("index %+v: want a response and a request", entries)
	}
	if resp.Offset != strconv.FormatInt(ref.Offset, 10) || resp.Length != strconv.FormatInt(ref.Length, 10) ||
		resp.Status != "200" || resp.URL != "http://a.test/page" || resp.Timestamp != "20261201183000123456" && resp.Timestamp != "20261201183000" {
		t.Fatalf("index entry %+v for ref %+v", *resp, ref)
	}
	if got := warctest.Payload(t, ref.File, ref.Offset); !bytes.Equal(got, payload) {
		t.Fatalf("warcio extract: %q, want %q", got, payload)
	}
	if h := warctest.Headers(t, ref.File, ref.Offset); !strings.Contains(h, "WARC-Concurrent-To") {
		t.Fatalf("response headers lack WARC-Concurrent-To:\n%s", h)
	}
}

// TestTruncatedAndRevisit: a cut payload says WARC-Truncated: length; a
// 304 to a conditional request is a revisit of the server-not-modified
// profile with its headers alone; warcio check passes both.
func TestTruncatedAndRevisit(t *testing.T) {
	w := create(t, warc.Options{})
	cut := exchange(t, "http://a.test/big", bytes.Repeat([]byte("x"), 1000))
	cut.Truncated = true
	ref1, err := w.Exchange(context.Background(), cut)
	if err != nil {
		t.Fatal(err)
	}
	nm := exchange(t, "http://a.test/same", nil)
	nm.Response = []byte("HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n")
	nm.NotModified = true
	ref2, err := w.Exchange(context.Background(), nm)
	if err != nil {
		t.Fatal(err)
	}
	if r := readRecord(t, ref1); r.fields.Get("WARC-Truncated") != "length" {
		t.Fatalf("cut payload: WARC-Truncated %q", r.fields.Get("WARC-Truncated"))
	}
	r := readRecord(t, ref2)
	if r.fields.Get("WARC-Type") != "revisit" || r.fields.Get("WARC-Profile") != warc.ProfileServerNotModified ||
		r.fields.Get("WARC-Payload-Digest") != "" || !bytes.Equal(r.block, nm.Response) {
		t.Fatalf("revisit record %v %q", r.fields, r.block)
	}
	w.Close()
	warctest.Check(t, ref1.File)
}

// TestRollOver: past MaxFileBytes the next exchange starts the next file
// of the sequence, each file opening with its warcinfo; an exchange is
// never split, and every file passes warcio check.
func TestRollOver(t *testing.T) {
	w := create(t, warc.Options{MaxFileBytes: 3000})
	var refs []warc.Ref
	for i := range 12 {
		// Random-looking bytes do not compress: about 600 bytes a member.
		payload := make([]byte, 600)
		for j := range payload {
			payload[j] = byte((i*7919 + j*104729) >> 3)
		}
		ref, err := w.Exchange(context.Background(), exchange(t, fmt.Sprintf("http://a.test/%d", i), payload))
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
		if got := readRecord(t, ref); !bytes.HasSuffix(got.block, payload) {
			t.Fatalf("record %d: wrong payload", i)
		}
	}
	w.Close()
	files := w.Files()
	if len(files) < 3 {
		t.Fatalf("%d files for 12 exchanges of ~1.5 KB at a 3 KB cap: %v", len(files), files)
	}
	for i, ref := range refs {
		if i > 0 && ref.File < refs[i-1].File || !slices.Contains(files, ref.File) {
			t.Fatalf("exchange %d in %s, files %v", i, ref.File, files)
		}
	}
	for i, f := range files {
		if want := fmt.Sprintf("out-%05d.warc.gz", i); filepath.Base(f) != want {
			t.Fatalf("file %d is %s, want %s", i, f, want)
		}
		if checked := warctest.Check(t, f); checked[0].Type != "warcinfo" || checked[0].Offset != 0 {
			t.Fatalf("%s starts with %+v", f, checked[0])
		}
		var reqs, resps int
		for _, e := range warctest.Index(t, f) {
			if e.IsRequest() {
				reqs++
			} else if !e.IsInfo() {
				resps++
			}
		}
		if reqs != resps || resps == 0 {
			t.Fatalf("%s: %d requests, %d responses: an exchange was split", f, reqs, resps)
		}
		st, _ := os.Stat(f)
		if st.Size() > 3000+4000 {
			t.Fatalf("%s is %d bytes at a 3000-byte cap", f, st.Size())
		}
	}
}

// TestResumeAfterCrash: a crash may leave a partial member at a file's
// end; every record before it still reads, and the next writer of the
// sequence starts a new file instead of appending after it.
func TestResumeAfterCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.warc.gz")
	w := create(t, warc.Options{Path: path})
	ref, err := w.Exchange(context.Background(), exchange(t, "http://a.test/1", []byte("one")))
	if err != nil {
		t.Fatal(err)
	}
	// The crash: half a member after the last whole one, never closed.
	data, _ := os.ReadFile(ref.File)
	f, _ := os.OpenFile(ref.File, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(data[ref.Offset : ref.Offset+ref.Length/2])
	f.Close()
	readRecord(t, ref)

	again := create(t, warc.Options{Path: path})
	ref2, err := again.Exchange(context.Background(), exchange(t, "http://a.test/2", []byte("two")))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(ref2.File) != "job-00001.warc.gz" {
		t.Fatalf("resumed into %s, want job-00001.warc.gz", ref2.File)
	}
	again.Close()
	readRecord(t, ref2)
	warctest.Check(t, ref2.File)
	if got := warctest.Payload(t, ref.File, ref.Offset); string(got) != "one" {
		t.Fatalf("record before the crash: %q", got)
	}
}

// TestLargeAndConcurrent: payloads past the in-memory spool go through
// temporary files; exchanges from many goroutines at once all land whole.
func TestLargeAndConcurrent(t *testing.T) {
	w := create(t, warc.Options{})
	const n = 16
	refs := make([]warc.Ref, n)
	payloads := make([][]byte, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		size := 1000
		if i%4 == 0 {
			size = 3 << 20
		}
		payloads[i] = bytes.Repeat([]byte{byte('a' + i)}, size)
		ex := exchange(t, fmt.Sprintf("http://a.test/%d", i), payloads[i])
		wg.Go(func() {
			ref, err := w.Exchange(context.Background(), ex)
			refs[i] = ref
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	for i, ref := range refs {
		rec := readRecord(t, ref)
		if rec.fields.Get("WARC-Payload-Digest") != b32sha256(payloads[i]) {
			t.Fatalf("exchange %d: payload digest %s", i, rec.fields.Get("WARC-Payload-Digest"))
		}
	}
	warctest.Check(t, refs[0].File)
	if got := warctest.Payload(t, refs[0].File, refs[0].Offset); !bytes.Equal(got, payloads[0]) {
		t.Fatalf("3 MiB payload: extracted %d bytes", len(got))
	}
}

func TestCreateRefuses(t *testing.T) {
	for _, p := range []string{"out.warc", "out.gz", ".warc.gz", filepath.Join(t.TempDir(), "missing", "x.warc.gz")} {
		if _, err := warc.Create(warc.Options{Path: p}); err == nil {
			t.Errorf("Create(%q): no error", p)
		}
	}
	w := create(t, warc.Options{})
	w.Close()
	if _, err := w.Exchange(context.Background(), exchange(t, "http://a.test/", nil)); err == nil {
		t.Fatal("Exchange after Close: no error")
	}
}
