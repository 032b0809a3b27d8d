package localmode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// listen serves rt on a loopback port for the test and returns its base
// URL; the server closes before the runtime does.
func listen(t *testing.T, rt *Runtime, o ServeOptions) string {
	t.Helper()
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	srv, err := rt.Listen(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return "http://" + srv.Addr().String()
}

// call sends one request and returns its status, headers and body.
func call(t *testing.T, method, u string, body string, header map[string]string, host string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestServeRefuses: what another web page, a DNS-rebinding page or a
// foreign name can send is refused before the ingest handler sees it, and
// nothing it sent is queued.
func TestServeRefuses(t *testing.T) {
	t.Parallel()
	rt := open(t, Options{State: filepath.Join(t.TempDir(), "state.db"), Out: io.Discard})
	base := listen(t, rt, ServeOptions{AllowedHosts: []string{"downloader.test", "proxy.test:8443"}})
	port := base[strings.LastIndexByte(base, ':')+1:]
	good := `{"url": "https://example.com/"}`
	js := map[string]string{"Content-Type": "application/json"}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{"Content-Type": "application/json"}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	cases := []struct {
		name, method, path, body string
		header                   map[string]string
		host                     string
		want                     int
	}{
		{"foreign Host (DNS rebinding)", "POST", "/urls", good, js, "evil.example:" + port, http.StatusMisdirectedRequest},
		{"foreign Host without port", "POST", "/urls", good, js, "evil.example", http.StatusMisdirectedRequest},
		{"loopback name on another port", "GET", "/healthz", "", nil, "localhost:1", http.StatusMisdirectedRequest},
		{"foreign Host on healthz", "GET", "/healthz", "", nil, "evil.example:" + port, http.StatusMisdirectedRequest},
		{"foreign Origin", "POST", "/urls", good, with(map[string]string{"Origin": "http://evil.example"}), "", http.StatusForbidden},
		{"foreign Origin on another loopback port", "POST", "/urls", good, with(map[string]string{"Origin": "http://127.0.0.1:1"}), "", http.StatusForbidden},
		{"Origin null", "POST", "/urls", good, with(map[string]string{"Origin": "null"}), "", http.StatusForbidden},
		{"foreign Origin on GET", "GET", "/healthz", "", map[string]string{"Origin": "http://evil.example"}, "", http.StatusForbidden},
		{"cross-site fetch", "POST", "/urls", good, with(map[string]string{"Sec-Fetch-Site": "cross-site"}), "", http.StatusForbidden},
		{"text/plain (a form or no-cors fetch)", "POST", "/urls", good, map[string]string{"Content-Type": "text/plain"}, "", http.StatusUnsupportedMediaType},
		{"form", "POST", "/urls", "url=x", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "", http.StatusUnsupportedMediaType},
		{"no Content-Type", "POST", "/urls", good, nil, "", http.StatusUnsupportedMediaType},
		{"preflight", "OPTIONS", "/urls", "", map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}, "", http.StatusForbidden},
		{"preflight from its own origin", "OPTIONS", "/urls", "", map[string]string{"Origin": base, "Access-Control-Request-Method": "POST"}, "", http.StatusForbidden},
		{"OPTIONS", "OPTIONS", "/urls", "", nil, "", http.StatusForbidden},
	}
	for _, c := range cases {
		code, h, body := call(t, c.method, base+c.path, c.body, c.header, c.host)
		if code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.want)
		}
		var msg struct{ Message string }
		if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.Message == "" {
			t.Errorf("%s: body %q, want a JSON message saying why", c.name, body)
		}
		for k := range h {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s: answered %s: %s; no CORS is ever granted", c.name, k, h.Get(k))
			}
		}
	}
	if p := rt.Progress(); p.Expected != 0 {
		t.Errorf("%d URLs expected after refused requests, want none queued", p.Expected)
	}

	// Its own names pass: the loopback names with the port, the allowed
	// ones (any case, a trailing dot), its own origin.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost.:" + port, "[::1]:" + port, "downloader.test:" + port, "proxy.test:8443"} {
		if code, _, body := call(t, "GET", base+"/healthz", "", nil, host); code != http.StatusOK {
			t.Errorf("Host %s: %d %s, want 200", host, code, body)
		}
	}
	for _, origin := range []string{base, "http://localhost:" + port, "https://proxy.test:8443"} {
		code, _, body := call(t, "POST", base+"/urls", good, with(map[string]string{"Origin": origin, "Sec-Fetch-Site": "same-origin"}), "")
		if code != http.StatusAccepted {
			t.Errorf("Origin %s: %d %s, want 202", origin, code, body)
		}
	}
	code, _, body := call(t, "GET", base+"/healthz", "", nil, "")
	var health struct {
		OK                         bool
		Expected, Results, Pending int
	}
	if err := json.Unmarshal([]byte(body), &health); code != http.StatusOK || err != nil || !health.OK || health.Expected != 3 || health.Pending != 3 {
		t.Errorf("healthz: %d %s, want 200 ok with 3 expected and pending (Run not started)", code, body)
	}
}

// TestServeToken: with a token, every request but GET /healthz must carry
// it; a missing or wrong one is 401 and queues nothing.
func TestServeToken(t *testing.T) {
	t.Parallel()
	rt := open(t, Options{Out: io.Discard})
	base := listen(t, rt, ServeOptions{Token: "s3cret-token"})
	good := `{"url": "https://example.com/"}`
	for name, auth := range map[string]string{"missing": "", "wrong": "Bearer s3cret-tokex", "prefix": "Bearer s3cret", "basic": "Basic czNjcmV0LXRva2Vu", "bare": "s3cret-token"} {
		h := map[string]string{"Content-Type": "application/json"}
		if auth != "" {
			h["Authorization"] = auth
		}
		code, hdr, body := call(t, "POST", base+"/urls", good, h, "")
		if code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s token on POST: %d %s (WWW-Authenticate %q), want 401", name, code, body, hdr.Get("WWW-Authenticate"))
		}
		if code, _, body := call(t, "GET", base+"/urls/0123", "", h, ""); code != http.StatusUnauthorized {
			t.Errorf("%s token on GET /urls/{id}: %d %s, want 401", name, code, body)
		}
	}
	if p := rt.Progress(); p.Expected != 0 {
		t.Errorf("%d URLs expected after unauthorized requests", p.Expected)
	}
	if code, _, body := call(t, "GET", base+"/healthz", "", nil, ""); code != http.StatusOK {
		t.Errorf("healthz without token: %d %s, want 200", code, body)
	}
	ok := map[string]string{"Content-Type": "application/json", "Authorization": "bearer s3cret-token"}
	if code, _, body := call(t, "POST", base+"/urls", good, ok, ""); code != http.StatusAccepted {
		t.Errorf("with the token: %d %s, want 202", code, body)
	}
}

// TestServeOptionsCheck: an address other machines can reach needs a
// token; loopback does not. Checked before anything listens, so this test
// never listens beyond loopback.
func TestServeOptionsCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr, token string
		want        error
	}{
		{"0.0.0.0:8080", "", ErrTokenRequired},
		{":8080", "", ErrTokenRequired},
		{"[::]:8080", "", ErrTokenRequired},
		{"192.0.2.7:8080", "", ErrTokenRequired},
		{"myhost.example:8080", "", ErrTokenRequired},
		{"0.0.0.0:8080", "  ", ErrTokenRequired},
		{"0.0.0.0:8080", "t", nil},
		{"127.0.0.1:8080", "", nil},
		{"127.0.0.2:0", "", nil},
		{"localhost:8080", "", nil},
		{"[::1]:8080", "", nil},
	} {
		if err := CheckServeOptions(ServeOptions{Addr: c.addr, Token: c.token}); !errors.Is(err, c.want) {
			t.Errorf("%s token %q: %v, want %v", c.addr, c.token, err, c.want)
		}
	}
	if err := CheckServeOptions(ServeOptions{Addr: "8080"}); err == nil {
		t.Error("address without a port accepted")
	}
	rt := open(t, Options{Out: io.Discard})
	if srv, err := rt.Listen(ServeOptions{Addr: "0.0.0.0:0"}); !errors.Is(err, ErrTokenRequired) {
		if srv != nil {
			srv.Close(context.Background())
		}
		t.Fatalf("Listen on 0.0.0.0 without a token: %v, want ErrTokenRequired", err)
	}
}

// TestAllowedHosts: the Host names each kind of listen address has.
func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	bound := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 8080} }
	loop, err := allowedHosts("127.0.0.1:0", bound("127.0.0.1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080"} {
		mustf(t, loop[h], "loopback listener refuses %s: %v", h, loop)
	}
	mustf(t, len(loop) == 3, "loopback listener allows %v, want only its three names", loop)

	one, _ := allowedHosts("192.0.2.7:8080", bound("192.0.2.7"), []string{"box.lan,ignored", " Proxy.Test:443 "})
	mustf(t, one["192.0.2.7:8080"] && one["box.lan,ignored:8080"] && one["proxy.test:443"] && !one["localhost:8080"],
		"192.0.2.7 listener allows %v", one)

	all, _ := allowedHosts("0.0.0.0:8080", bound("0.0.0.0"), []string{"box.lan"})
	mustf(t, all["localhost:8080"] && all["127.0.0.1:8080"] && all["box.lan:8080"] && !all["0.0.0.0:8080"] && !all["evil.example:8080"],
		"0.0.0.0 listener allows %v", all)
	if name, err := os.Hostname(); err == nil {
		mustf(t, all[hostKey(name, "8080")], "0.0.0.0 listener does not allow its host name %s: %v", name, all)
	}
}

// TestServeSlowBody: clients that send their headers and never their body
// are cut off at the read deadline, even more of them than the connection
// cap, and the server then answers again.
func TestServeSlowBody(t *testing.T) {
	t.Parallel()
	rt := open(t, Options{Out: io.Discard})
	base := listen(t, rt, ServeOptions{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, MaxConns: 3})
	addr := strings.TrimPrefix(base, "http://")
	const clients = 10
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			head := "POST /urls HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n["
			if i%2 == 1 {
				head = "POST /urls HTTP/1.1\r\nHost: " + addr + "\r\n" // headers never end
			}
			if _, err := io.WriteString(c, head); err != nil {
				errs <- err
				return
			}
			// This deadline only bounds a hang: the server must end the
			// connection long before.
			c.SetReadDeadline(time.Now().Add(time.Minute))
			if _, err := io.Copy(io.Discard, c); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					errs <- errors.New("connection still open after a minute")
					return
				}
				// A reset is the server closing too.
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if code, _, body := call(t, "GET", base+"/healthz", "", nil, ""); code != http.StatusOK {
		t.Errorf("healthz after the slow clients: %d %s", code, body)
	}
	if p := rt.Progress(); p.Expected != 0 {
		t.Errorf("%d URLs queued from bodies that never came", p.Expected)
	}
}

// TestServeConnectionCap: with MaxConns connections held open, a further
// client is not served until one of them ends.
func TestServeConnectionCap(t *testing.T) {
	t.Parallel()
	rt := open(t, Options{Out: io.Discard})
	// Deadlines far off: only the cap decides here.
	base := listen(t, rt, ServeOptions{MaxConns: 2, ReadHeaderTimeout: 5 * time.Minute, ReadTimeout: 5 * time.Minute})
	addr := strings.TrimPrefix(base, "http://")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// Two connections that start a request and never finish it; a
	// request on each shows it was accepted (the kernel queues the rest).
	var held []net.Conn
	for range 2 {
		c := dial()
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(time.Minute))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("held connection's first request: %v %v", resp, err)
		}
		resp.Body.Close()
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n") // and no end
		held = append(held, c)
	}
	third := dial()
	io.WriteString(third, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	br := bufio.NewReader(third)
	third.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := br.Peek(1); err == nil {
		t.Fatal("a third connection was served while two held the cap of 2")
	}
	held[0].Close()
	third.SetReadDeadline(time.Now().Add(time.Minute)) // bounds a hang only
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("third connection after one held ended: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestServeResultByID: GET /urls/{id} answers pending for an accepted URL
// until its result is written, then the result's line as in the output,
// from the state file (a new process on it answers the same); 404 for an
// id this state never accepted.
func TestServeResultByID(t *testing.T) {
	t.Parallel()
	site := startSite(t, demosite.Options{Hosts: 1})
	dir := t.TempDir()
	state, outPath := filepath.Join(dir, "state.db"), filepath.Join(dir, "out.jsonl")
	arrived := make(chan result.Result, 10)
	rt, err := Open(context.Background(), Options{State: state, Out: openOut(t, outPath), Addresses: fetch.PrivatePolicy(), Log: testLog(t),
		OnResult: func(r result.Result) { arrived <- r }})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rt.Listen(ServeOptions{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + srv.Addr().String()
	u := site.URL(site.Hosts()[0], 0)
	code, _, body := call(t, "POST", base+"/urls", `{"url": "`+u+`"}`, map[string]string{"Content-Type": "application/json"}, "")
	var ar ingesthandler.APIResponse
	if err := json.Unmarshal([]byte(body), &ar); err != nil || code != http.StatusAccepted || len(ar.IDs) != 1 {
		t.Fatalf("POST: %d %s", code, body)
	}
	id := ar.IDs[0]
	// Run has not started: nothing is fetched yet.
	code, _, body = call(t, "GET", base+"/urls/"+id, "", nil, "")
	if code != http.StatusAccepted || body != `{"id":"`+id+`","status":"pending"}`+"\n" {
		t.Errorf("GET before the result: %d %s, want 202 pending", code, body)
	}
	if code, _, body = call(t, "GET", base+"/urls/0123456789abcdef01234567", "", nil, ""); code != http.StatusNotFound || !strings.Contains(body, "0123456789abcdef01234567") {
		t.Errorf("GET of an unknown id: %d %s, want 404", code, body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { _, err := rt.Run(ctx, RunOptions{Serve: true}); ran <- err }()
	select {
	case r := <-arrived:
		if r.ID != id {
			t.Fatalf("result for %s, want %s", r.ID, id)
		}
	case <-time.After(time.Minute): // bounds a hang only
		t.Fatal("no result after a minute")
	}
	code, hdr, body := call(t, "GET", base+"/urls/"+id, "", nil, "")
	out, _ := os.ReadFile(outPath)
	if code != http.StatusOK || body != string(out) || hdr.Get("Content-Type") != "application/json" {
		t.Errorf("GET after the result: %d %q, want 200 and the output's line %q", code, body, out)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(context.Background()); err != nil {
		t.Error(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}

	// The next process on the state answers from it.
	rt2 := open(t, Options{State: state, Out: io.Discard})
	base2 := listen(t, rt2, ServeOptions{})
	if code, _, body := call(t, "GET", base2+"/urls/"+id, "", nil, ""); code != http.StatusOK || body != string(out) {
		t.Errorf("GET from the next process: %d %q, want 200 and %q", code, body, out)
	}
}

// TestServeWildcard listens on 0.0.0.0, which needs a token, inside a
// network namespace of its own (the test binary run again under unshare
// --net), where only loopback exists: nothing is exposed.
func TestServeWildcard(t *testing.T) {
	if os.Getenv("STANDALONE_NETNS_CHILD") == "1" {
		serveWildcardInNamespace(t)
		return
	}
	t.Parallel()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare not found: listening on 0.0.0.0 is tested only in a network namespace (TestServeOptionsCheck covers the token rule)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // bounds a hang only
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--net", "sh", "-c",
		`ip link set lo up && exec "$0" -test.run '^TestServeWildcard$' -test.count=1 -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), "STANDALONE_NETNS_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "=== RUN") {
		t.Skipf("unshare --net is not permitted here (%v: %s): listening on 0.0.0.0 is tested only in a network namespace (TestServeOptionsCheck covers the token rule)", err, bytes.TrimSpace(out))
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestServeWildcard") {
		t.Fatalf("in the network namespace: %v\n%s", err, out)
	}
}

func serveWildcardInNamespace(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 {
			t.Fatalf("interface %s is here: not in a network namespace of its own, refusing to listen on 0.0.0.0", i.Name)
		}
	}
	rt := open(t, Options{Out: io.Discard})
	if _, err := rt.Listen(ServeOptions{Addr: "0.0.0.0:0"}); !errors.Is(err, ErrTokenRequired) {
		t.Fatalf("0.0.0.0 without a token: %v, want ErrTokenRequired", err)
	}
	base := listen(t, rt, ServeOptions{Addr: "0.0.0.0:0", Token: "ns-token", AllowedHosts: []string{"box.lan"}})
	port := base[strings.LastIndexByte(base, ':')+1:]
	base = "http://127.0.0.1:" + port
	post := `{"url": "https://example.com/"}`
	js := map[string]string{"Content-Type": "application/json"}
	if code, _, body := call(t, "POST", base+"/urls", post, js, ""); code != http.StatusUnauthorized {
		t.Errorf("POST without the token: %d %s, want 401", code, body)
	}
	authed := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer ns-token"}
	if code, _, body := call(t, "POST", base+"/urls", post, authed, ""); code != http.StatusAccepted {
		t.Errorf("POST with the token: %d %s, want 202", code, body)
	}
	hosts := []string{"box.lan:" + port, "localhost:" + port}
	if name, err := os.Hostname(); err == nil {
		hosts = append(hosts, name+":"+port)
	}
	for _, h := range hosts {
		if code, _, body := call(t, "GET", base+"/healthz", "", nil, h); code != http.StatusOK {
			t.Errorf("Host %s: %d %s, want 200", h, code, body)
		}
	}
	if code, _, body := call(t, "GET", base+"/healthz", "", nil, "evil.example:"+port); code != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: %d %s, want 421", code, body)
	}
}
