package remote

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// item is one URL as it goes on the input queue, with the line it came
// from.
type item struct {
	line int64
	host string
	// enc is the item as sent: a JSON string when it carries no
	// validators (the smallest form ingest takes), else an object.
	enc []byte
}

// Rejected is an input line refused as invalid; it is never sent.
type Rejected struct {
	Line  int64  `json:"line"`
	Error string `json:"error"`
}

var bom = []byte("\xef\xbb\xbf")

// parseLine turns one line of a URL list into the items it carries, with
// the same parser ingest runs (shared/domain/urlmsg), so a line refused here is one
// ingest would refuse: the line is a JSON object, array or string as the
// input queue takes them, or a bare URL; blank lines and lines starting
// with # carry nothing. A line with one bad item is refused whole, as an
// SQS record is.
func parseLine(no int64, text []byte) ([]item, error) {
	if no == 1 {
		text = bytes.TrimPrefix(text, bom)
	}
	text = bytes.TrimSpace(text)
	if len(text) == 0 || text[0] == '#' {
		return nil, nil
	}
	var msgs []urlmsg.Message
	switch text[0] {
	case '{', '[', '"':
		good, bad, err := urlmsg.Parse("line", text)
		if err != nil {
			return nil, err
		}
		if len(bad) > 0 {
			if text[0] == '[' {
				return nil, fmt.Errorf("item %d: %s", bad[0].Index, bad[0].Error)
			}
			return nil, fmt.Errorf("%s", bad[0].Error)
		}
		msgs = good
	default:
		m, err := urlmsg.Validate(urlmsg.Input{URL: string(text)})
		if err != nil {
			return nil, err
		}
		msgs = []urlmsg.Message{m}
	}
	items := make([]item, 0, len(msgs))
	for _, m := range msgs {
		enc, err := encodeItem(m)
		if err != nil {
			return nil, err
		}
		items = append(items, item{line: no, host: m.Host, enc: enc})
	}
	return items, nil
}

// encodeItem writes a validated URL as the input queue takes it, without
// HTML escapes (a '&' in a query would cost six bytes). A URL that is not
// UTF-8 is refused rather than sent with its bytes replaced; U+FFFE and
// U+FFFF, which SQS refuses in a message, travel as JSON escapes.
func encodeItem(m urlmsg.Message) ([]byte, error) {
	if !utf8.ValidString(m.URL) || !utf8.ValidString(m.ETag) || !utf8.ValidString(m.LastModified) || !utf8.ValidString(m.ValidatorsURL) {
		return nil, fmt.Errorf("url %q has bytes that are not UTF-8: percent-encode them", m.URL)
	}
	var v any = m.URL
	if m.ETag != "" || m.LastModified != "" {
		v = struct {
			URL           string `json:"url"`
			ETag          string `json:"etag,omitempty"`
			LastModified  string `json:"lastModified,omitempty"`
			ValidatorsURL string `json:"validatorsUrl,omitempty"`
		}{m.URL, m.ETag, m.LastModified, m.ValidatorsURL}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.URL, err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	b = bytes.ReplaceAll(b, []byte("\uFFFE"), []byte(`\ufffe`))
	return bytes.ReplaceAll(b, []byte("\uFFFF"), []byte(`\uffff`)), nil
}

// message is one input queue message: a JSON array of URLs, from lines
// first to last of the list.
type message struct {
	body        []byte
	urls        int
	first, last int64
}

// lines names a message's lines in errors.
func (m message) lines() string {
	if m.first == m.last {
		return fmt.Sprintf("line %d", m.first)
	}
	return fmt.Sprintf("lines %d-%d", m.first, m.last)
}

// pack orders a window's items by host (keeping each host's lines in
// their order) and packs them into JSON arrays of at most maxBytes and
// urlmsg.MaxItems items: a host's URLs travel together, so ingest writes
// the host once for them. The result depends only on the items and
// maxBytes, so a resumed run packs a window as the run before it did.
func pack(items []item, maxBytes int) []message {
	sorted := slices.Clone(items)
	slices.SortStableFunc(sorted, func(a, b item) int { return cmp.Compare(a.host, b.host) })
	var msgs []message
	var cur message
	for _, it := range sorted {
		if cur.urls > 0 && (len(cur.body)+1+len(it.enc)+1 > maxBytes || cur.urls == urlmsg.MaxItems) {
			cur.body = append(cur.body, ']')
			msgs = append(msgs, cur)
			cur = message{}
		}
		if cur.urls == 0 {
			cur = message{body: append(make([]byte, 0, min(maxBytes, 64<<10)), '['), first: it.line, last: it.line}
		} else {
			cur.body = append(cur.body, ',')
		}
		cur.body = append(cur.body, it.enc...)
		cur.urls++
		cur.first, cur.last = min(cur.first, it.line), max(cur.last, it.line)
	}
	if cur.urls > 0 {
		cur.body = append(cur.body, ']')
		msgs = append(msgs, cur)
	}
	return msgs
}

// maxBatch is the most entries SendMessageBatch takes.
const maxBatch = 10

// batches groups the messages not yet sent (their indices in msgs) into
// SendMessageBatch calls of at most maxBatch entries and maxBytes in all.
func batches(msgs []message, sent map[int]bool, maxBytes int) [][]int {
	var out [][]int
	var cur []int
	size := 0
	for i, m := range msgs {
		if sent[i] {
			continue
		}
		if len(cur) > 0 && (len(cur) == maxBatch || size+len(m.body) > maxBytes) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, i)
		size += len(m.body)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
