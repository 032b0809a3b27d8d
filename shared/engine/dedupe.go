package engine

import (
	"context"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// maxKeptInline bounds the inline bodies a session keeps, in all, to
// answer later copies of the URLs it fetched: it keeps them until it ends,
// and most URLs have no copy, so the bound holds memory to a few results
// whatever the session's length (a worker is budgeted at InlineBodyBytes
// plus buffers). Up to maxKeptKnown, a result is kept still when a copy is
// known among the queued entries read (noteDupes) and its body is within
// maxKeptCopy. A body stored apart (body.Ref, WARC) costs only its
// reference.
const (
	maxKeptInline = 1 << 20
	maxKeptKnown  = 4 << 20
	maxKeptCopy   = 64 << 10
)

// dupeKey identifies a request: the same URL with other validators, or
// validators for another hop, is not the same request (a conditional one
// may answer 304 with no body).
type dupeKey struct{ url, etag, lastModified, validatorsFor string }

func keyOf(e hostqueue.Entry) dupeKey {
	return dupeKey{e.URL, e.ETag, e.LastModified, e.ValidatorsFor()}
}

// dupes is what a session remembers to fetch each URL once: the results
// of the requests it made, by URL, and the URLs seen more than once in the
// host's queue.
type dupes struct {
	fetched map[dupeKey]result.Result
	// queued holds, by key, the first id of the queued entries read so
	// far (the session's load and each commit's answer), and copied the
	// keys read with a second, distinct id: all a fetch asks is whether
	// its URL has a copy waiting, and a set of ids per key would be held
	// for the whole session.
	queued map[dupeKey]string
	copied map[dupeKey]bool
	// kept is the inline body bytes held in fetched.
	kept int
}

// noteDupes records the queued entries read from the store, so a fetch of
// a URL that has copies waiting keeps its whole result for them.
func (w *worker) noteDupes(head []hostqueue.Entry) {
	if w.dupes.queued == nil {
		w.dupes.queued = make(map[dupeKey]string, len(head))
	}
	for _, e := range head {
		k := keyOf(e)
		first, ok := w.dupes.queued[k]
		switch {
		case !ok:
			w.dupes.queued[k] = e.ID
		case first != e.ID && !w.dupes.copied[k]:
			if w.dupes.copied == nil {
				w.dupes.copied = map[dupeKey]bool{}
			}
			w.dupes.copied[k] = true
		}
	}
}

// processOnce is process for a URL not yet requested in this session; a
// copy of one that was (the same URL and validators, another id) is
// answered from that fetch, with its own id and without a request.
//
// Cross-host redirects are fetched again: their result queues the target
// under an id made from the entry's, which a copy needs for itself.
func (w *worker) processOnce(ctx context.Context, ent hostqueue.Entry) (result.Result, outcome) {
	k := keyOf(ent)
	if prev, ok := w.dupes.fetched[k]; ok {
		prev.ID = ent.ID
		return prev, outDone
	}
	res, o := w.process(ctx, ent)
	if o != outDone || res.Status == result.StatusRedirect {
		// The entry waits: nothing to share yet. (An answer without a
		// request, robots.txt's denial or a name that does not resolve,
		// holds for the copies as well.)
		return res, o
	}
	n := len(res.Data)
	limit := maxKeptInline
	if n <= maxKeptCopy && w.dupes.copied[k] {
		limit = maxKeptKnown
	}
	if w.dupes.kept+n > limit {
		return res, o
	}
	w.dupes.kept += n
	if w.dupes.fetched == nil {
		w.dupes.fetched = map[dupeKey]result.Result{}
	}
	w.dupes.fetched[k] = res
	return res, o
}
