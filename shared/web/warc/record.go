// Package warc writes what the downloader fetched as WARC 1.1 files (ISO
// 28500:2017), the web archive format that Heritrix, wget --warc-file and
// Common Crawl write and that warcio, pywb and the CDX indexers read.
//
// Each request the fetcher makes becomes a request record and its
// response record (linked by WARC-Concurrent-To), or, for a 304 answer to
// a conditional request, a revisit record of the server-not-modified
// profile. Every record is one gzip member (a .warc.gz any reader can
// seek into by offset), written whole before its offset is reported, so a
// reference in a result never points at a partial record, and a crash
// leaves every record written before it readable.
package warc

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Record types written.
const (
	TypeWarcinfo = "warcinfo"
	TypeRequest  = "request"
	TypeResponse = "response"
	TypeRevisit  = "revisit"
)

// ProfileServerNotModified is the revisit profile of a 304 answer to a
// conditional request (WARC 1.1 §6.7.3).
const ProfileServerNotModified = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"

// digestAlgorithm labels the digests: SHA-256, as the product's results
// carry, base32 as WARC writers spell labelled digests. warcio's check
// verifies any algorithm hashlib knows, sha256 included.
const digestAlgorithm = "sha256"

// Ref points at one record: the file (locally) or the object (in a
// bucket) that holds it, and the byte range of its gzip member, so a
// reader seeks (or one ranged GET fetches) the record alone.
type Ref struct {
	// File is the local WARC file, as the --warc path named its folder.
	File string `json:"file,omitempty"`
	// Bucket and Key name a WARC segment in S3.
	Bucket string `json:"bucket,omitempty"`
	Key    string `json:"key,omitempty"`
	// Offset and Length are the record's gzip member in the file.
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

// Exchange is one HTTP request and what answered it, as transferred: what
// the fetcher hands the archive.
type Exchange struct {
	// URL is the request's target (WARC-Target-URI).
	URL string
	// Date is when the request was sent (WARC-Date of both records).
	Date time.Time
	// RemoteIP is the address the connection reached (WARC-IP-Address).
	RemoteIP string
	// Protocol is the HTTP version on the wire, as WARC-Protocol spells
	// it: "http/1.1", "http/1.0" or "h2". An h2 message is written in the
	// HTTP/1.1 form every WARC reader parses.
	Protocol string
	// Request is the request line and headers as sent, each line ending
	// in CRLF, the empty line included.
	Request []byte
	// Response is the status line and headers as received, in the same
	// form.
	Response []byte
	// Payload is the response's payload as transferred; nil for none.
	Payload *Payload
	// Truncated says the payload was cut (the body cap): WARC-Truncated.
	Truncated bool
	// NotModified makes the response a revisit record of the
	// server-not-modified profile (a 304 to a conditional request).
	NotModified bool
}

// record is one WARC record to write: its header fields in order and its
// block, a head (HTTP headers, or warcinfo fields) and a payload after it.
type record struct {
	fields  [][2]string
	head    []byte
	payload *spool // nil: the block is the head alone
	// payloadDigest adds WARC-Payload-Digest (response records).
	payloadDigest bool
}

// newRecordID returns a fresh WARC-Record-ID: a random (version 4) UUID URN.
func newRecordID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("<urn:uuid:%x-%x-%x-%x-%x>", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// formatDate is WARC-Date: UTC, to the microsecond, as WARC 1.1 allows.
func formatDate(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

// clean keeps a field value on one line: a CR or LF would end the header.
func clean(v string) string {
	if !strings.ContainsAny(v, "\r\n") {
		return v
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, v)
}

func digestOf(h hash.Hash) string {
	return digestAlgorithm + ":" + base32.StdEncoding.EncodeToString(h.Sum(nil))
}

// gzipWriters are reused: a compressor's state is most of a megabyte,
// and making one per record cost more CPU than the fetching. BestSpeed:
// compressing every byte fetched is the writer's whole CPU cost, and level
// 1 takes a third of the default's time for a few percent more bytes on
// web pages.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return zw
}}

// member compresses rec into one gzip member in out: the WARC header
// (with its digests and Content-Length), the block, and the two CRLFs
// that end a record. The payload is read twice, once for the digests and
// once into the member; it stays in the caller's spool meanwhile.
func (rec *record) member(out io.Writer) error {
	block, payload := sha256.New(), sha256.New()
	block.Write(rec.head)
	length := int64(len(rec.head))
	if rec.payload != nil {
		r, err := rec.payload.reader()
		if err != nil {
			return err
		}
		n, err := io.Copy(io.MultiWriter(block, payload), r)
		if err != nil {
			return fmt.Errorf("read payload: %w", err)
		}
		length += n
	}
	var hdr bytes.Buffer
	hdr.WriteString("WARC/1.1\r\n")
	for _, f := range rec.fields {
		if f[1] != "" {
			fmt.Fprintf(&hdr, "%s: %s\r\n", f[0], clean(f[1]))
		}
	}
	fmt.Fprintf(&hdr, "WARC-Block-Digest: %s\r\n", digestOf(block))
	if rec.payloadDigest {
		fmt.Fprintf(&hdr, "WARC-Payload-Digest: %s\r\n", digestOf(payload))
	}
	hdr.WriteString("Content-Length: " + strconv.FormatInt(length, 10) + "\r\n\r\n")

	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(out)
	zw.Write(hdr.Bytes())
	zw.Write(rec.head)
	if rec.payload != nil {
		r, err := rec.payload.reader()
		if err != nil {
			return err
		}
		if _, err := io.Copy(zw, r); err != nil {
			return fmt.Errorf("compress record: %w", err)
		}
	}
	zw.Write([]byte("\r\n\r\n"))
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress record: %w", err)
	}
	return nil
}

// Encoded is an exchange's two records compressed, ready to append to a
// file or a segment: the request's gzip member, then the response's.
// Close it once appended.
type Encoded struct{ members [2]spool }

// Encode compresses ex's request and response (or revisit) records, with
// fresh record IDs from newID (nil: random UUIDs). It reads ex.Payload
// and leaves it open.
func Encode(ex *Exchange, newID func() string) (*Encoded, error) {
	if newID == nil {
		newID = newRecordID
	}
	req, resp := exchangeRecords(ex, newID)
	enc := &Encoded{}
	if err := req.member(&enc.members[0]); err != nil {
		enc.Close()
		return nil, fmt.Errorf("warc request record of %s: %w", ex.URL, err)
	}
	if err := resp.member(&enc.members[1]); err != nil {
		enc.Close()
		return nil, fmt.Errorf("warc response record of %s: %w", ex.URL, err)
	}
	return enc, nil
}

// EncodeInfo compresses the warcinfo record that opens a file or segment
// named name (its base name), dated date, with the given fields.
func EncodeInfo(name string, date time.Time, info [][2]string, newID func() string) (*Encoded, error) {
	if newID == nil {
		newID = newRecordID
	}
	enc := &Encoded{}
	if err := warcinfoRecord(name, date, info, newID).member(&enc.members[0]); err != nil {
		enc.Close()
		return nil, err
	}
	return enc, nil
}

// Len is the bytes the records take appended.
func (e *Encoded) Len() int64 { return e.members[0].Len() + e.members[1].Len() }

// Response is the response record's place within the encoded bytes: its
// offset from their start, and its length.
func (e *Encoded) Response() (offset, length int64) { return e.members[0].Len(), e.members[1].Len() }

// WriteTo appends the records to w.
func (e *Encoded) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for i := range e.members {
		r, err := e.members[i].reader()
		if err != nil {
			return total, err
		}
		n, err := io.Copy(w, r)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// Close frees the encoded records.
func (e *Encoded) Close() error {
	return errors.Join(e.members[0].Close(), e.members[1].Close())
}

// exchangeRecords turns an exchange into its request record and its
// response (or revisit) record, each naming the other.
func exchangeRecords(ex *Exchange, newID func() string) (req, resp *record) {
	reqID, respID := newID(), newID()
	date := formatDate(ex.Date)
	req = &record{
		fields: [][2]string{
			{"WARC-Type", TypeRequest},
			{"WARC-Record-ID", reqID},
			{"WARC-Date", date},
			{"WARC-Target-URI", ex.URL},
			{"WARC-IP-Address", ex.RemoteIP},
			{"WARC-Concurrent-To", respID},
			{"WARC-Protocol", ex.Protocol},
			{"Content-Type", "application/http;msgtype=request"},
		},
		head: ex.Request,
	}
	resp = &record{
		fields: [][2]string{
			{"WARC-Type", TypeResponse},
			{"WARC-Record-ID", respID},
			{"WARC-Date", date},
			{"WARC-Target-URI", ex.URL},
			{"WARC-IP-Address", ex.RemoteIP},
			{"WARC-Concurrent-To", reqID},
			{"WARC-Protocol", ex.Protocol},
		},
		head:          ex.Response,
		payloadDigest: true,
	}
	if ex.Payload != nil {
		resp.payload = &ex.Payload.s
	}
	if ex.NotModified {
		// A 304 carries no payload to keep: the record is its headers, and
		// says which earlier capture it confirms by its target.
		resp.fields[0][1] = TypeRevisit
		resp.fields = append(resp.fields,
			[2]string{"WARC-Profile", ProfileServerNotModified},
			[2]string{"WARC-Refers-To-Target-URI", ex.URL})
		resp.payload, resp.payloadDigest = nil, false
	} else if ex.Truncated {
		resp.fields = append(resp.fields, [2]string{"WARC-Truncated", "length"})
	}
	resp.fields = append(resp.fields, [2]string{"Content-Type", "application/http;msgtype=response"})
	return req, resp
}

// warcinfoRecord describes the file: its name, and the fields the writer
// was given (software, the parameters that shaped the crawl).
func warcinfoRecord(name string, date time.Time, info [][2]string, newID func() string) *record {
	var head bytes.Buffer
	for _, f := range info {
		fmt.Fprintf(&head, "%s: %s\r\n", f[0], clean(f[1]))
	}
	head.WriteString("format: WARC File Format 1.1\r\n")
	head.WriteString("conformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n")
	return &record{
		fields: [][2]string{
			{"WARC-Type", TypeWarcinfo},
			{"WARC-Record-ID", newID()},
			{"WARC-Date", formatDate(date)},
			{"WARC-Filename", name},
			{"Content-Type", "application/warc-fields"},
		},
		head: head.Bytes(),
	}
}
