package fetch_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urldownloader/urldownloader/shared/web/fetch"
	"github.com/urldownloader/urldownloader/shared/web/fetch/fetchtest"
)

// TestNetworkKeepsTheGuard checks that a test's Network replaces only the
// sockets: the address guard still judges every address dialed through it.
func TestNetworkKeepsTheGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n fetchtest.Network
		srv := n.NewServer("127.0.1.1", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "hello")
		}))
		defer srv.Close()
		for _, tc := range []struct {
			name         string
			allowPrivate bool
			want         fetch.Kind
		}{
			{"guard on", false, fetch.KindDenied},
			{"guard lifted", true, 0},
		} {
			f := fetch.New(fetch.Options{Timeout: time.Minute, AllowPrivate: tc.allowPrivate, Network: &n}, nil)
			resp, err := f.Fetch(context.Background(), fetch.Request{URL: srv.URL + "/"})
			f.CloseIdleConnections()
			if tc.want != 0 {
				if fetch.KindOf(err) != tc.want {
					t.Errorf("%s: Fetch = %v, want kind %v", tc.name, err, tc.want)
				}
				continue
			}
			if err != nil || string(resp.Body) != "hello" {
				t.Errorf("%s: Fetch = %v, %v; want hello", tc.name, resp, err)
			}
		}
	})
}
