package warc_test

import (
	"testing"

	"github.com/urldownloader/urldownloader/shared/web/warc"
)

// BenchmarkEncode is the CPU an exchange of a small page costs: its two
// records digested and compressed.
func BenchmarkEncode(b *testing.B) {
	p := warc.NewPayload()
	p.Write([]byte("demo page 127.0.0.2:40000/page/17\n"))
	defer p.Close()
	ex := &warc.Exchange{URL: "http://127.0.0.2:40000/page/17", Protocol: "http/1.1",
		Request:  []byte("GET /page/17 HTTP/1.1\r\nHost: 127.0.0.2:40000\r\nUser-Agent: urldownloader/1.0\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\n\r\n"),
		Response: []byte("HTTP/1.1 200 OK\r\nContent-Length: 34\r\nContent-Type: text/plain; charset=utf-8\r\nDate: Tue, 01 Dec 2026 19:00:00 GMT\r\n\r\n"),
		Payload:  p}
	b.ReportAllocs()
	for b.Loop() {
		enc, err := warc.Encode(ex, nil)
		if err != nil {
			b.Fatal(err)
		}
		enc.Close()
	}
}
