package cli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/warctest"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
)

// hostileServer is a raw-socket server on loopback: it answers each path
// with the bytes answers holds for it, whatever they are, and counts the
// requests per path.
func hostileServer(t *testing.T, answers map[string]string) (addr string, count func(path string) int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	seen := map[string]int{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					return
				}
				path := strings.Fields(line + " / ")[1]
				mu.Lock()
				seen[path]++
				mu.Unlock()
				reply, ok := answers[path]
				if !ok {
					reply = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
				}
				c.Write([]byte(reply))
			}()
		}
	}()
	return ln.Addr().String(), func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[path]
	}
}

// TestHostileAnswersWithAndWithoutWarc runs local mode on hostile answers
// without and with --warc: each must end the same way in both, at once
// (one attempt), as a fetch_error that says what happened. A storm of
// 1,000 "100 Continue" answers ended as fetch_error without --warc and
// as fetched with it; a status 600 or 999 and a gzip body with trailing
// junk were retried as if the host had failed.
func TestHostileAnswersWithAndWithoutWarc(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("hostile"))
	zw.Close()
	junk := append(gz.Bytes(), "xx"...)
	answers := map[string]string{
		"/storm": strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 1000) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
		"/s600":  "HTTP/1.1 600 Odd\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		"/s999":  "HTTP/1.1 999 Odd\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		"/junk":  fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(junk), junk),
	}
	says := map[string]string{
		"/storm": "more than 5 1xx informational responses",
		"/s600":  "status 600 is outside 100-599",
		"/s999":  "status 999 is outside 100-599",
		"/junk":  "undo content coding",
	}
	for _, warc := range []bool{false, true} {
		t.Run(fmt.Sprintf("warc=%v", warc), func(t *testing.T) {
			addr, count := hostileServer(t, answers)
			var urls []string
			for path := range answers {
				urls = append(urls, "http://"+addr+path)
			}
			opts := localmode.Options{
				Addresses: AddressPolicy(nil, false, true), ShardCount: 1,
				Params: map[string]string{"FetchDelay": "10ms", "MaxBackoff": "50ms"},
			}
			if warc {
				opts.Warc = filepath.Join(t.TempDir(), "out.warc.gz")
			}
			var out bytes.Buffer
			opts.Out = &out
			rt, err := localmode.Open(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			// Bounds a hang only: the run ends once every URL has a result.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			in := &localmode.Input{Name: "test", R: strings.NewReader(strings.Join(urls, "\n") + "\n")}
			if _, err := rt.Run(ctx, localmode.RunOptions{Input: in}); err != nil {
				t.Fatal(err)
			}
			got := map[string]result.Result{}
			for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
				var r result.Result
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("result line %q: %v", line, err)
				}
				got[r.URL] = r
			}
			if warc {
				// The answers that ended as errors left the file valid.
				warctest.Check(t, filepath.Join(filepath.Dir(opts.Warc), "out-00000.warc.gz"))
			}
			for path, want := range says {
				r := got["http://"+addr+path]
				if r.Status != result.StatusFetchError || r.Attempts != 1 || !strings.Contains(r.Error, want) {
					t.Errorf("%s: %s after %d attempts (%q), want fetch_error at once saying %q", path, r.Status, r.Attempts, r.Error, want)
				}
				if n := count(path); n != 1 {
					t.Errorf("%s requested %d times, want once", path, n)
				}
			}
		})
	}
}
