package fetch

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/web/warc"
)

// Archive keeps every exchange the fetcher makes, as it went over the
// wire: shared/web/warc's Writer, for WARC output. Exchange returns where the
// response's record is; it must have written it whole when it returns,
// since the result that points at it may be published next.
type Archive interface {
	Exchange(ctx context.Context, ex *warc.Exchange) (warc.Ref, error)
}

// capture gathers one request's exchange for the Archive while the
// transport runs it: the header fields as it writes them, the address of
// the connection it is handed, and the payload as it is read (before any
// content coding is undone). Its trace hooks run on the transport's
// goroutines, hence the lock.
type capture struct {
	sent    time.Time
	mu      sync.Mutex
	remote  string
	fields  [][2]string
	payload *warc.Payload
}

func newCapture(sent time.Time) *capture {
	return &capture{sent: sent, payload: warc.NewPayload()}
}

// gotConn notes the address the request's connection reached.
func (c *capture) gotConn(conn net.Conn) {
	addr := conn.RemoteAddr()
	if addr == nil {
		return
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		host = addr.String()
	}
	c.mu.Lock()
	c.remote = host
	c.mu.Unlock()
}

// wroteField is httptrace's WroteHeaderField: each field as the transport
// writes it, in order (HTTP/2's pseudo-fields included).
func (c *capture) wroteField(key string, values []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range values {
		c.fields = append(c.fields, [2]string{key, v})
	}
}

// requestHead is the request line and header fields as sent. An HTTP/2
// request is written in the HTTP/1.1 form WARC readers parse: its
// :authority becomes Host, its other pseudo-fields the request line.
func (c *capture) requestHead(hreq *http.Request) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b bytes.Buffer
	b.WriteString(hreq.Method + " " + hreq.URL.RequestURI() + " HTTP/1.1\r\n")
	for _, f := range c.fields {
		switch {
		case f[0] == ":authority":
			b.WriteString("Host: " + f[1] + "\r\n")
		case strings.HasPrefix(f[0], ":"):
		default:
			b.WriteString(f[0] + ": " + f[1] + "\r\n")
		}
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// responseHead is the status line and header fields as received, in the
// HTTP/1.x form (an h2 response as HTTP/1.1, its WARC-Protocol saying
// h2). Go's transport hands fields over in a map: they come sorted by
// name, each name's values in the order received. Transfer-Encoding is
// not among them: the transport undid it, and the payload is kept
// without it, as WARC's payload is defined.
func responseHead(resp *http.Response) []byte {
	proto := resp.Proto
	if resp.ProtoMajor != 1 {
		proto = "HTTP/1.1"
	}
	var b bytes.Buffer
	b.WriteString(proto + " " + resp.Status + "\r\n")
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range resp.Header {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range resp.Header[k] {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// protocol is the exchange's WARC-Protocol.
func protocol(resp *http.Response) string {
	if resp.ProtoMajor == 2 {
		return "h2"
	}
	return strings.ToLower(resp.Proto)
}

// tee makes the response's body copy every byte read into the payload:
// the bytes as transferred, whatever the decoder then makes of them. A
// failure of the payload's own writes shows when it is archived, never in
// the body's read.
func (c *capture) tee(resp *http.Response) {
	resp.Body = &teeBody{ReadCloser: resp.Body, to: c.payload}
}

type teeBody struct {
	io.ReadCloser
	to *warc.Payload
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		t.to.Write(p[:n])
	}
	return n, err
}

// exchange is what the capture holds once the body has been read.
func (c *capture) exchange(rawURL string, hreq *http.Request, resp *http.Response, req Request, truncated bool) *warc.Exchange {
	c.mu.Lock()
	remote := c.remote
	c.mu.Unlock()
	return &warc.Exchange{
		URL:       rawURL,
		Date:      c.sent,
		RemoteIP:  remote,
		Protocol:  protocol(resp),
		Request:   c.requestHead(hreq),
		Response:  responseHead(resp),
		Payload:   c.payload,
		Truncated: truncated,
		NotModified: resp.StatusCode == http.StatusNotModified &&
			(req.ETag != "" || req.LastModified != ""),
	}
}

// close frees the payload.
func (c *capture) close() {
	if c != nil {
		c.payload.Close()
	}
}
