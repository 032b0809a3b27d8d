// Package result defines the message the downloader sends to the output queue:
// exactly one terminal result per accepted URL (at least once, deduplicated by ID).
package result

import (
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/web/warc"
)

// Status is the terminal outcome of one accepted URL.
type Status string

// The statuses a result can carry. Consumers switch on them; they are part of
// the public message format and never change meaning.
const (
	// StatusFetched: the server answered 2xx and the body is in Data, or,
	// when larger than InlineBodyBytes, in a store that Body points at.
	StatusFetched Status = "fetched"
	// StatusFetchError: non-2xx, timeout, connection or DNS error after the
	// last attempt; Error says which.
	StatusFetchError Status = "fetch_error"
	// StatusDenied: refused by policy (robots.txt, address guard, crawl delay
	// too long); Error names the rule.
	StatusDenied Status = "denied"
	// StatusDropped: evicted from the host's queue by PersistLimit before it
	// was fetched.
	StatusDropped Status = "dropped"
	// StatusRedirect: the server redirected to another host; Location holds
	// the target, which is enqueued on its own host's queue.
	StatusRedirect Status = "redirect"
	// StatusNotModified: a conditional GET answered 304.
	StatusNotModified Status = "not_modified"
	// StatusStopped: a refresh schedule ended because the input sent its
	// URL with refresh "0"; final is true (docs/refresh.md).
	StatusStopped Status = "stopped"
)

// The values of Encoding; none (the field omitted) means Data is the body as
// UTF-8 text. Result.InlineBody undoes each.
const (
	// EncodingBase64 marks Data as base64 (the body was not valid UTF-8
	// text).
	EncodingBase64 = "base64"
	// EncodingGzipBase64 marks Data as the body gzip-compressed (RFC 1952),
	// then base64: with ResultBodyEncoding=gzip, for a body that comes out
	// shorter so. The name lists the codings in the order they were
	// applied, as a consumer undoes them last to first; it is not "gzip"
	// so that a consumer written for base64 alone cannot mistake it for a
	// body it knows how to read.
	EncodingGzipBase64 = "gzip+base64"
)

// Result is one output message. Field names are the JSON contract.
type Result struct {
	ID          string `json:"id"`
	Host        string `json:"host"`
	URL         string `json:"url"`
	Status      Status `json:"status"`
	HTTPStatus  int    `json:"httpStatus,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	// ContentEncoding is set when the body is passed on as the server
	// sent it, in a content coding the fetcher does not undo (every coding
	// it asks for is undone): Data, bytes and sha256 then describe the
	// encoded bytes.
	ContentEncoding string `json:"contentEncoding,omitempty"`
	Data            string `json:"data,omitempty"`
	Encoding        string `json:"encoding,omitempty"`
	// Body points at the body when it was kept in a store instead of Data
	// (read it with shared/web/wholebody); Bytes and SHA256 repeat its own.
	Body      *body.Ref `json:"body,omitempty"`
	Bytes     int64     `json:"bytes"`
	SHA256    string    `json:"sha256,omitempty"`
	Truncated bool      `json:"truncated,omitempty"`
	FetchedAt time.Time `json:"fetchedAt"`
	Attempts  int       `json:"attempts,omitempty"`
	// Location is a redirect's target (StatusRedirect, or a redirect
	// refused); for any other result after same-host redirects, the URL
	// whose answer (or refusal) the result describes.
	Location     string `json:"location,omitempty"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
	// ValidatorsURL is the URL ETag and LastModified belong to when it is
	// not URL: the hop that answered, after same-host redirects. A
	// conditional refetch sends all three back as they are (input field
	// validatorsUrl), so its validators go to that hop's request.
	ValidatorsURL string `json:"validatorsUrl,omitempty"`
	Error         string `json:"error,omitempty"`
	// Warc names the WARC record of the answer the result came from (a
	// response, or for not_modified its revisit record), when WARC
	// output is on: the file (locally) or the object, and the byte range
	// of the record's gzip member. A result of a redirect followed on the
	// same host names the last answer's; the hops before it are records
	// of the same file too.
	Warc *warc.Ref `json:"warc,omitempty"`
	// RetryOf is the id of the result this one tries again (local mode's
	// --retry-failed): the retry has an id of its own, so a consumer that
	// deduplicates by id keeps both, and can tell which one is newer.
	RetryOf string `json:"retryOf,omitempty"`
	// Changed, Seq and Final are set on the results of a refreshing URL
	// only (docs/refresh.md): whether its content changed since the last
	// fetch, the result's number (1, 2, ... per id: keep the highest),
	// and whether it is the schedule's last.
	Changed *bool `json:"changed,omitempty"`
	Seq     int   `json:"seq,omitempty"`
	Final   bool  `json:"final,omitempty"`
}
