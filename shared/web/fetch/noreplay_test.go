package fetch_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestGetCarriesNoBody: the empty body that makes requests non-replayable
// must not reach the wire: the server sees a plain GET, no chunked
// encoding, no Content-Length.
func TestGetCarriesNoBody(t *testing.T) {
	type seen struct {
		te     []string
		cl     int64
		header string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{te: r.TransferEncoding, cl: r.ContentLength, header: r.Header.Get("Content-Length")}
	}))
	defer srv.Close()
	f := fetch.New(fetch.Options{AllowPrivate: true, Timeout: 5 * time.Second}, nil)
	if _, err := f.Fetch(context.Background(), fetch.Request{URL: srv.URL + "/x"}); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if len(s.te) != 0 || s.cl != 0 || s.header != "" {
		t.Errorf("server saw Transfer-Encoding %v, ContentLength %d, Content-Length header %q; want a plain GET", s.te, s.cl, s.header)
	}
}
