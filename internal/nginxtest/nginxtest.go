// Package nginxtest starts Debian's nginx on loopback for tests that need a
// real server's behaviour (limit_req's rate limiting). `make test` installs
// it and names it in NGINX, which makes a missing one a failure; a plain `go
// test` skips, saying how to install it, when nginx is not on the machine.
package nginxtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Binary is where Debian's nginx package puts the server.
const Binary = "/usr/sbin/nginx"

// Server is a running nginx.
type Server struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	// Dir holds the configuration and the access log.
	Dir string
}

// Start runs nginx on a free loopback port with http holding httpConf (at
// http level, e.g. a limit_req_zone) and server holding serverConf (inside
// the server block, e.g. a location with limit_req). It is stopped when the
// test ends. {{root}} in serverConf names a directory holding page.txt
// (serve it with "root {{root}}; try_files /page.txt =404;"): a `return`
// would answer in the rewrite phase, before limit_req applies. The access
// log (Statuses) records each request's status.
func Start(t *testing.T, httpConf, serverConf string) *Server {
	t.Helper()
	bin := Binary
	if env := os.Getenv("NGINX"); env != "" {
		// make test installs it and names it: missing then is a failure.
		if _, err := os.Stat(env); err != nil {
			t.Fatalf("NGINX=%s: %v", env, err)
		}
		bin = env
	} else if _, err := os.Stat(bin); err != nil {
		if p, err := exec.LookPath("nginx"); err == nil {
			bin = p
		} else {
			t.Skip("nginx is not installed (apt-get install nginx-light)")
		}
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	root := filepath.Join(dir, "www")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "page.txt"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serverConf = strings.ReplaceAll(serverConf, "{{root}}", root)
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 256; }
http {
	access_log %[1]s/access.log;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	%[3]s
	server {
		listen %[2]s;
		%[4]s
	}
}
`, dir, addr, httpConf, serverConf)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Bounds only a hang: nginx listens within milliseconds.
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx did not listen on %s: %v\n%s", addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &Server{Addr: addr, Dir: dir}
}

// Statuses returns the status of each request in the access log, in order,
// with its path: "GET /p1 200".
func (s *Server) Statuses(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir, "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// 127.0.0.1 - - [date] "GET /p HTTP/1.1" 200 ...
		q := strings.Split(line, `"`)
		if len(q) < 3 {
			continue
		}
		req := strings.Fields(q[1])
		st := strings.Fields(q[2])
		if len(req) < 2 || len(st) < 1 {
			continue
		}
		out = append(out, req[0]+" "+req[1]+" "+st[0])
	}
	return out
}
