package warc

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/urldownloader/urldownloader/shared/web/coding"
)

// Record is one record read back from the gzip member a Ref points at.
type Record struct {
	// Fields are the WARC header fields (WARC-Type, WARC-Target-URI, ...).
	Fields textproto.MIMEHeader
	// Status is the HTTP status of a response or revisit record (0 for
	// other types); Header its HTTP header fields.
	Status int
	Header textproto.MIMEHeader
	// Payload is the rest of the block as transferred (its content coding
	// still on).
	Payload io.Reader
	zr      *gzip.Reader
}

// ReadRecord reads the record in member, the bytes of one gzip member
// (a Ref's range of a file or object). Close the record when done.
func ReadRecord(member io.Reader) (*Record, error) {
	zr, err := gzip.NewReader(member)
	if err != nil {
		return nil, fmt.Errorf("warc record: %w", err)
	}
	zr.Multistream(false)
	br := bufio.NewReader(zr)
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil || !strings.HasPrefix(line, "WARC/") {
		zr.Close()
		return nil, fmt.Errorf("warc record: starts %q (%v)", line, err)
	}
	fields, err := tp.ReadMIMEHeader()
	if err != nil {
		zr.Close()
		return nil, fmt.Errorf("warc record header: %w", err)
	}
	n, err := strconv.ParseInt(fields.Get("Content-Length"), 10, 64)
	if err != nil || n < 0 {
		zr.Close()
		return nil, fmt.Errorf("warc record: Content-Length %q", fields.Get("Content-Length"))
	}
	rec := &Record{Fields: fields, zr: zr}
	block := bufio.NewReader(io.LimitReader(br, n))
	if !strings.HasPrefix(fields.Get("Content-Type"), "application/http") {
		rec.Payload = block
		return rec, nil
	}
	htp := textproto.NewReader(block)
	status, err := htp.ReadLine()
	if err == nil {
		rec.Header, err = htp.ReadMIMEHeader()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		zr.Close()
		return nil, fmt.Errorf("warc record's http header: %w", err)
	}
	if proto, rest, ok := strings.Cut(status, " "); ok && strings.HasPrefix(proto, "HTTP/") {
		code, _, _ := strings.Cut(rest, " ")
		rec.Status, _ = strconv.Atoi(code)
	}
	rec.Payload = block
	return rec, nil
}

// Content is the payload with its Content-Encoding undone (package coding:
// the codings the fetcher asks for): the body as the result saw it. A
// coding the fetcher does not undo is left on, as the result had it.
func (r *Record) Content() (io.ReadCloser, error) {
	dec, _, err := coding.Decode(r.Header.Get("Content-Encoding"), r.Payload)
	return dec, err
}

// Close frees the record's decompressor.
func (r *Record) Close() error { return r.zr.Close() }
