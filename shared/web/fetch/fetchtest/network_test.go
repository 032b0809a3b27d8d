package fetchtest_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urldownloader/urldownloader/shared/web/fetch"
	"github.com/urldownloader/urldownloader/shared/web/fetch/fetchtest"
)

func TestFetchInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n fetchtest.Network
		slow := n.NewServer("127.0.1.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				time.Sleep(time.Hour) // virtual: the fetch times out first
			}
			_, _ = io.WriteString(w, "hello")
		}))
		defer slow.Close()
		f := fetch.New(fetch.Options{Timeout: time.Minute, AllowPrivate: true, Network: &n,
			Resolve: map[string][]netip.Addr{"site.test": {netip.MustParseAddr("127.0.1.1")}}}, nil)
		defer f.CloseIdleConnections()
		ctx := context.Background()
		_, p, _ := net.SplitHostPort(slow.Listener.Addr().String())

		start := time.Now()
		resp, err := f.Fetch(ctx, fetch.Request{URL: "http://site.test:" + p + "/"})
		if err != nil || string(resp.Body) != "hello" {
			t.Fatalf("Fetch = %v, %v; want hello", resp, err)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("an in-memory fetch took %v of virtual time, want 0", took)
		}
		_, err = f.Fetch(ctx, fetch.Request{URL: slow.URL + "/slow"})
		if fetch.KindOf(err) != fetch.KindTimeout {
			t.Errorf("slow Fetch = %v (kind %v), want a timeout", err, fetch.KindOf(err))
		}
		if took := time.Since(start); took != time.Minute {
			t.Errorf("the timeout came after %v of virtual time, want exactly 1m", took)
		}
		_, err = f.Fetch(ctx, fetch.Request{URL: "http://127.0.1.2:" + p + "/"})
		if fetch.KindOf(err) != fetch.KindConnection {
			t.Errorf("Fetch of an address nobody listens on = %v (kind %v), want refused", err, fetch.KindOf(err))
		}
		strict := fetch.New(fetch.Options{Network: &n}, nil)
		_, err = strict.Fetch(ctx, fetch.Request{URL: slow.URL + "/"})
		if fetch.KindOf(err) != fetch.KindDenied {
			t.Errorf("Fetch of loopback without AllowPrivate = %v, want denied by the guard", err)
		}
	})
}
