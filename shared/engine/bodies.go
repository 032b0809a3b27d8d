package engine

import (
	"bytes"
	"context"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// Whole bodies (the claim-check pattern): with Engine.Bodies set, a page's
// body larger than the inline limit is streamed into that store as it is
// read (see fetch.Request.Store) and its result carries a reference
// instead of the data, so bodies up to MaxBodyBytes (1 GiB) pass through a
// worker in at most the inline limit plus the store's upload buffer.

// inlineLimit is the largest body a result carries inline: InlineBodyBytes,
// capped by what the output queue's message can hold (Engine.InlineLimit).
func (e *Engine) inlineLimit(p params.Params) int64 {
	n := p.InlineBodyBytes
	if e.InlineLimit > 0 && e.InlineLimit < n {
		n = e.InlineLimit
	}
	return n
}

// keptBody is how much of a body a worker holds in memory: all of it up to
// MaxBodyBytes without a store, at most the inline limit (plus the byte
// that shows there is more) with one. A store's upload buffers are its own
// bounded pool, outside the per-worker budget.
func (e *Engine) keptBody(p params.Params) int64 {
	if e.Bodies == nil {
		return p.MaxBodyBytes
	}
	return min(p.MaxBodyBytes, e.inlineLimit(p)+1)
}

// pageRequest is the request for a page (not robots.txt, which is read
// whole into memory): with a store, bodies beyond the inline limit go to
// it as they are read.
func (w *worker) pageRequest(target string) fetch.Request {
	req := fetch.Request{URL: target}
	if w.engine.Bodies != nil {
		req.Store, req.InlineBytes = w.engine.Bodies, w.engine.inlineLimit(w.p)
	}
	return req
}

// keepBody puts a 2xx response's body into res: the store's reference when
// the fetcher streamed it there, or the data inline. A body read into
// memory that is too large inline once packed as ResultBodyEncoding says
// (result.Pack: base64 takes 4/3 of a binary body, gzip about a third of
// a page) is put into the store from memory. The fetcher streams a body
// longer than the inline limit to the store before it is packed, so a
// worker still holds at most that much of a body: gzip makes results
// smaller, it does not keep a body above InlineBodyBytes inline. An error
// means the body could not be kept: the URL must stay queued (like
// fetch.KindLocal).
func (w *worker) keepBody(ctx context.Context, res *result.Result, resp *fetch.Response) error {
	if resp.Stored != nil {
		res.SetStored(*resp.Stored)
		return nil
	}
	in := result.Pack(resp.Body, w.p.ResultBodyEncoding)
	if w.engine.Bodies != nil && in.Size > w.engine.inlineLimit(w.p) {
		// Bounded like a streamed body's upload, which is part of its
		// request: a store that hangs cannot hold the worker longer.
		ctx, cancel := context.WithTimeout(ctx, w.p.FetchTimeout)
		defer cancel()
		ref, err := w.engine.Bodies.Put(ctx, bytes.NewReader(resp.Body), resp.ContentType)
		if err != nil {
			return err
		}
		res.SetStored(ref)
		return nil
	}
	res.SetInline(resp.Body, in)
	return nil
}
