package engine

import (
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// noteDupes tells a URL with a copy waiting (another id for the same URL
// and validators, read now or in an earlier read of the queue) from one
// read again under its own id, or with other validators.
func TestNoteDupes(t *testing.T) {
	w := &worker{}
	a := hostqueue.Entry{ID: "a", URL: "http://h/x"}
	w.noteDupes([]hostqueue.Entry{a, {ID: "b", URL: "http://h/y"}})
	// A commit's answer reads the queue's head again: a is there still.
	w.noteDupes([]hostqueue.Entry{a, {ID: "c", URL: "http://h/y", ETag: `"v1"`}})
	for _, e := range []hostqueue.Entry{a, {URL: "http://h/y"}, {URL: "http://h/y", ETag: `"v1"`}} {
		if w.dupes.copied[keyOf(e)] {
			t.Errorf("%s (etag %q) counted as having a copy: each id was read once", e.URL, e.ETag)
		}
	}
	w.noteDupes([]hostqueue.Entry{{ID: "d", URL: "http://h/x"}})
	if !w.dupes.copied[keyOf(a)] {
		t.Errorf("%s not counted as having a copy after ids a and d were read", a.URL)
	}
}
