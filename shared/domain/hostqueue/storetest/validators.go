package storetest

import (
	"slices"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// moved gives every entry of es validators recorded for a redirect
// target of another host (a long URL, as targets often are), alternating
// an ETag and a Last-Modified.
func moved(es []hostqueue.Entry) []hostqueue.Entry {
	out := slices.Clone(es)
	for i := range out {
		out[i].ValidatorsURL = strings.Replace(out[i].URL, "https://", "https://www.", 1) + "/moved?" + strings.Repeat("v", 40)
		if i%2 == 0 {
			out[i].ETag = `"moved-` + out[i].ID + `"`
		} else {
			out[i].LastModified = "Wed, 02 Dec 2026 10:00:00 GMT"
		}
	}
	return out
}

// testValidatorsURL: an entry's ValidatorsURL (the URL its validators
// were recorded for) comes back as it went in, through the host's own
// state and the pieces a long queue is stored in, in eviction reports
// and after a commit; one that names the entry's own URL comes back
// empty, which means the same (Entry.ValidatorsFor).
func testValidatorsURL(t *testing.T, _ Harness, e *env) {
	const key = "validators.example"
	own := hostqueue.Entry{ID: "own", URL: "https://validators.example/own", ETag: `"o"`, ValidatorsURL: "https://validators.example/own"}
	first := concat(moved(entries("a", 0, 3)), entries("b", 0, 2), []hostqueue.Entry{own})
	e.append(key, first, 100_000)
	want := slices.Clone(first)
	want[len(want)-1].ValidatorsURL = ""
	h := e.load(key, 10)
	if !slices.Equal(h.Head, want) {
		t.Errorf("head =\n  %+v\nwant\n  %+v", h.Head, want)
	}
	if got := h.Head[len(h.Head)-1].ValidatorsFor(); got != own.URL {
		t.Errorf("the entry naming its own URL has its validators for %q, want %q", got, own.URL)
	}

	// Enough to be stored in several pieces, every one with a long
	// validators URL (the pieces' size budget must count it).
	big := moved(bulky("c", 0, 1200))
	e.append(key, big, 100_000)
	all := concat(want, big)
	if h := e.load(key, len(all)+10); !slices.Equal(h.Head, all) {
		t.Errorf("after a long append: head of %d entries, want the %d appended, each as it went in", len(h.Head), len(all))
	}

	// What a commit leaves is still whole.
	h = e.commit(key, hostqueue.Commit{Done: ids(all[:4]), Want: 10})
	if !slices.Equal(h.Head, all[4:14]) {
		t.Errorf("head after a commit =\n  %+v\nwant\n  %+v", h.Head, all[4:14])
	}

	// An evicted entry is reported with its validators URL, so its
	// dropped result could say where they belong.
	rec := &recorder{e: e, key: key}
	extra := moved(entries("d", 0, 2))
	rec.expect(extra)
	if _, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: key, Entries: extra, Limit: len(all) - 4, Due: T0, OnEvict: rec.onEvict}); err != nil {
		t.Fatal(err)
	}
	if got := rec.all(); !slices.Equal(got, all[4:6]) {
		t.Errorf("evicted =\n  %+v\nwant\n  %+v", got, all[4:6])
	}
	if h := e.load(key, len(all)+10); !slices.Equal(h.Head[len(h.Head)-2:], extra) {
		t.Errorf("tail after eviction = %+v, want %+v", h.Head[len(h.Head)-2:], extra)
	}
}
