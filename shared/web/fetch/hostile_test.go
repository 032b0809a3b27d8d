package fetch_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/web/coding"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// allocated is how many bytes f allocates on the heap (TotalAlloc, which
// counts every allocation whether the collector has freed it since or
// not, so the figure is the cost of f and not of the machine's timing).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// stacked answers with a body compressed n times with deflate (zlib, at
// most MaxCodings times) and a Content-Encoding listing n deflates; pad
// adds a header of that many octets.
func stacked(t *testing.T, n, pad int) []byte {
	t.Helper()
	body := []byte(strings.Repeat("hostile ", 64))
	for range min(n, coding.MaxCodings) {
		body = zlibbed(t, body)
	}
	enc := strings.TrimSuffix(strings.Repeat("deflate,", n), ",")
	padding := ""
	if pad > 0 {
		padding = "X-Pad: " + strings.Repeat("p", pad) + "\r\n"
	}
	return []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s", enc, padding, len(body), body))
}

// TestStackedCodingsCapped sends 30,000 stacked deflates (240 KB of
// header): the fetch must end at once as a protocol error naming the cap,
// having allocated no more than an answer with 5 stacked deflates (and a
// header as long) takes, where building a decoder per listed coding took
// over a gigabyte.
func TestStackedCodingsCapped(t *testing.T) {
	f := fetch.New(localOptions(), fixedNow)
	bomb := stacked(t, 30000, 0)
	five := rawServer(t, stacked(t, coding.MaxCodings, len(bomb)))
	many := rawServer(t, bomb)
	// Warm up: the first fetch builds the fetcher's pools and the
	// connection machinery, which neither figure should count.
	if _, err := f.Fetch(context.Background(), fetch.Request{URL: five}); err != nil {
		t.Fatal(err)
	}
	var fiveErr, manyErr error
	var resp *fetch.Response
	base := allocated(func() { resp, fiveErr = f.Fetch(context.Background(), fetch.Request{URL: five}) })
	if fiveErr != nil || !strings.HasPrefix(string(resp.Body), "hostile ") {
		t.Fatalf("5 stacked deflates: %v, want the body decoded", fiveErr)
	}
	got := allocated(func() { _, manyErr = f.Fetch(context.Background(), fetch.Request{URL: many}) })
	want(t, "kind", fetch.KindOf(manyErr), fetch.KindProtocol)
	want(t, "transient", fetch.IsTransient(manyErr), false)
	if manyErr == nil || !strings.Contains(manyErr.Error(), "more than 5 stacked content codings") {
		t.Errorf("error %v, want one naming the cap of 5", manyErr)
	}
	// Reading the header costs the same in both; 64 KiB is room for the
	// error's text and what a run of the runtime allocates meanwhile.
	limit := base + 64<<10
	t.Logf("allocated %d bytes for 30,000 stacked deflates, %d for 5 with as long a header", got, base)
	if got > limit {
		t.Errorf("30,000 stacked deflates allocated %d bytes, want at most %d (5 stacked deflates, a header as long: %d)", got, limit, base)
	}
}

// TestDecodingFailsForGood checks that a body which arrived whole but
// cannot be decoded is a protocol error (final), while one cut short by
// the connection stays a transient connection error.
func TestDecodingFailsForGood(t *testing.T) {
	gz := gzipped(t, []byte("hello, hostile world"))
	answer := func(body []byte, length int) string {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", length, body)
	}
	for _, tc := range []struct {
		name  string
		reply string
		kind  fetch.Kind
	}{
		{"gzip with trailing junk", answer(append(gz[:len(gz):len(gz)], "xx"...), len(gz)+2), fetch.KindProtocol},
		{"gzip cut inside its header", answer(gz[:4], 4), fetch.KindProtocol},
		{"gzip cut inside its stream", answer(gz[:len(gz)-6], len(gz)-6), fetch.KindProtocol},
		{"six stacked codings", "HTTP/1.1 200 OK\r\nContent-Encoding: gzip, gzip, gzip, gzip, gzip, gzip\r\nContent-Length: 2\r\n\r\nxx", fetch.KindProtocol},
		{"connection closed inside the body", answer(gz[:len(gz)-6], len(gz)), fetch.KindConnection},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := rawServer(t, []byte(tc.reply))
			resp, err := fetch.New(localOptions(), fixedNow).Fetch(context.Background(), fetch.Request{URL: u})
			if err == nil {
				t.Fatalf("Fetch returned %d %q, want an error", resp.HTTPStatus, resp.Body)
			}
			want(t, "kind of "+err.Error(), fetch.KindOf(err), tc.kind)
			want(t, "transient", fetch.IsTransient(err), tc.kind == fetch.KindConnection)
		})
	}
}

// heldServer answers every connection with reply and then holds it open,
// sending nothing more, until the test ends: a server that stalls.
func heldServer(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				c.Write([]byte(reply))
				<-done
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

// TestHostileAnswersBothPaths sends each hostile answer to the plain-HTTP
// path and to the Transport (the path a fetcher with an Archive, i.e.
// --warc, takes): both must end the same way, with an error that says
// what happened.
func TestHostileAnswersBothPaths(t *testing.T) {
	storm := strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 1000) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	five := strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n", 5) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	longLine := "HTTP/1.1 200 OK\r\nX-Long: " + strings.Repeat("a", 300<<10) + "\r\n\r\n"
	manyLines := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Filler: "+strings.Repeat("a", 1000)+"\r\n", 400) + "\r\n"
	// The cap falls inside a name: the cut line has no colon.
	longNames := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-"+strings.Repeat("n", 1000)+": v\r\n", 400) + "\r\n"
	for _, tc := range []struct {
		name  string
		url   func(t *testing.T) string
		kind  fetch.Kind // KindOther: no error, the answer is used
		says  string
		never string
	}{
		{"1,000 100 Continue", func(t *testing.T) string { return rawServer(t, []byte(storm)) }, fetch.KindProtocol, "more than 5 1xx informational responses", ""},
		{"5 103 Early Hints", func(t *testing.T) string { return rawServer(t, []byte(five)) }, fetch.KindOther, "", ""},
		{"status 600", func(t *testing.T) string {
			return rawServer(t, []byte("HTTP/1.1 600 Odd\r\nContent-Length: 0\r\n\r\n"))
		}, fetch.KindProtocol, "status 600 is outside 100-599", ""},
		{"status 999", func(t *testing.T) string {
			return rawServer(t, []byte("HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n"))
		}, fetch.KindProtocol, "status 999 is outside 100-599", ""},
		{"status 099", func(t *testing.T) string {
			return rawServer(t, []byte("HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n"))
		}, fetch.KindProtocol, "status 99 is outside 100-599", ""},
		{"one long header line", func(t *testing.T) string { return rawServer(t, []byte(longLine)) }, fetch.KindProtocol, "headers exceeded", "missing colon"},
		{"long header names", func(t *testing.T) string { return rawServer(t, []byte(longNames)) }, fetch.KindProtocol, "headers exceeded", "missing colon"},
		{"many header lines", func(t *testing.T) string { return rawServer(t, []byte(manyLines)) }, fetch.KindProtocol, "headers exceeded", "missing colon"},
		{"status line stalls", func(t *testing.T) string { return heldServer(t, "HTTP/") }, fetch.KindTimeout, "no complete answer within", "malformed"},
		{"header stalls", func(t *testing.T) string { return heldServer(t, "HTTP/1.1 200 OK\r\nX-Half: ") }, fetch.KindTimeout, "no complete answer within", "missing colon"},
	} {
		for _, warc := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/warc=%v", tc.name, warc), func(t *testing.T) {
				opts := localOptions()
				opts.Timeout = time.Second
				if warc {
					opts.Archive = archiveWriter(t)
				}
				resp, err := fetch.New(opts, fixedNow).Fetch(context.Background(), fetch.Request{URL: tc.url(t)})
				if tc.kind == fetch.KindOther {
					if err != nil || resp.HTTPStatus != 200 || string(resp.Body) != "ok" {
						t.Fatalf("Fetch: %v, want the 200 after the 1xx answers", err)
					}
					return
				}
				if err == nil {
					t.Fatalf("Fetch returned %d, want an error", resp.HTTPStatus)
				}
				want(t, "kind of "+err.Error(), fetch.KindOf(err), tc.kind)
				want(t, "transient", fetch.IsTransient(err), tc.kind == fetch.KindTimeout)
				if !strings.Contains(err.Error(), tc.says) || tc.never != "" && strings.Contains(err.Error(), tc.never) {
					t.Errorf("error %q, want it to say %q (and not %q)", err, tc.says, tc.never)
				}
			})
		}
	}
}
