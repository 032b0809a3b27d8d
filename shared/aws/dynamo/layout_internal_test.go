package dynamo

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

// TestLayoutAttributeNames pins the stored attribute names: the item types'
// fields may be renamed, their names in the table may not (the items
// already stored read them).
func TestLayoutAttributeNames(t *testing.T) {
	entry := entryItem{ID: "i", URL: "u", ETag: "e", LastModified: "m", ValidatorsURL: "w", Hops: 1}
	for _, tc := range []struct {
		name string
		item any
		want []string
	}{
		{"host", hostItem{PK: "p", SK: "s", VirtualShard: 1, Listed: "x", ListedDue: 1, Version: 1, Nonces: []string{"n"},
			LastFetch: 1, PauseUntil: 1, Errors: 1, FailingSince: 1, LastError: "e", RateDelay: 1, RateSince: 1, LastTook: 1, Tail: []entryItem{entry},
			Chunks: []chunkRef{{ID: "c", Count: 1}}, FirstChunkTaken: 1, Attempts: map[string]int{"i": 1}, TTL: 1,
			SpilledSinceEmpty: true, Robots: map[string]inlineRobots{"o": {Status: 200, GzipBody: []byte{1}, FetchedAt: 1, StoredApart: true}}},
			[]string{"at", "c", "co", "dd", "er", "fs", "hc", "ix", "le", "lf", "lt", "n", "pk", "pu", "q", "rb", "rd", "rs", "sk", "ttl", "v", "vs"}},
		{"due-index item", indexItem{PK: "p", SK: "s", Hosts: []string{"h"}, Versions: []int64{1}, Dues: []int64{1}, WrittenAt: 1, Nonce: "n", Count: 1},
			[]string{"c", "h", "hd", "hv", "n", "pk", "sk", "t"}},
		{"entry", entry, []string{"e", "h", "i", "m", "u", "v"}},
		{"inline robots", inlineRobots{Status: 200, GzipBody: []byte{1}, FetchedAt: 1, StoredApart: true}, []string{"b", "s", "t", "x"}},
		{"chunk ref", chunkRef{ID: "c", Count: 1}, []string{"i", "n"}},
		{"chunk", chunkItem{PK: "p", SK: "s", Entries: []entryItem{entry}, WrittenAt: 1, Nonce: "n"}, []string{"n", "pk", "q", "sk", "t"}},
		{"lease", leaseItem{PK: "p", SK: "s", Owner: "o", Until: 1, Nonce: "n"}, []string{"n", "o", "pk", "sk", "u"}},
		{"robots", robotsItem{PK: "p", SK: "s", Status: 200, Body: []byte{1}, At: 1, TTL: 1}, []string{"b", "pk", "s", "sk", "t", "ttl"}},
		{"idempotency", idemItem{PK: "p", SK: "s", BodyHash: "b", State: "s", Token: "t", LockUntil: 1, Expires: 1, TTL: 1,
			Status: 200, AcceptedIDs: "a", Denied: 1}, []string{"bh", "dn", "ex", "ids", "lk", "pk", "sc", "sk", "st", "tk", "ttl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			av, err := attributevalue.MarshalMap(tc.item)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for name := range av {
				got = append(got, name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("attributes %v, want %v", got, tc.want)
			}
		})
	}
	// Entries in the host item keep their own short names too.
	av, err := attributevalue.MarshalMap(hostItem{Tail: toEntryItems([]hostqueue.Entry{{ID: "a", URL: "b"}})})
	if err != nil {
		t.Fatal(err)
	}
	q := av["q"].(*types.AttributeValueMemberL).Value[0].(*types.AttributeValueMemberM).Value
	if len(q) != 2 || q["i"] == nil || q["u"] == nil {
		t.Errorf("an entry with only an ID and a URL is stored as %v, want i and u", q)
	}
}

// TestEntryConversion: an entry survives the trip to the stored form and
// back, every field included.
func TestEntryConversion(t *testing.T) {
	es := []hostqueue.Entry{{ID: "a", URL: "https://a.example/", ETag: `"x"`, LastModified: "Tue, 01 Jan 2030 00:00:00 GMT", Hops: 3}, {ID: "b", URL: "https://b.example/"}}
	if got := toEntries(toEntryItems(es)); !slices.Equal(got, es) {
		t.Errorf("round trip = %+v, want %+v", got, es)
	}
	if toEntries(nil) != nil {
		t.Error("toEntries(nil) is not nil")
	}
	// Validators recorded for a redirect's target keep its URL; ones that
	// name the entry's own URL are stored without it (absent = its own).
	moved := hostqueue.Entry{ID: "c", URL: "https://c.example/old", ETag: `"y"`, ValidatorsURL: "https://c.example/new"}
	own := hostqueue.Entry{ID: "d", URL: "https://d.example/", ETag: `"z"`, ValidatorsURL: "https://d.example/"}
	its := toEntryItems([]hostqueue.Entry{moved, own})
	if its[0].ValidatorsURL != moved.ValidatorsURL || its[1].ValidatorsURL != "" {
		t.Errorf("stored validators urls %q and %q, want %q and none", its[0].ValidatorsURL, its[1].ValidatorsURL, moved.ValidatorsURL)
	}
	if got := toEntries(its); got[0] != moved || got[1].ValidatorsURL != "" || got[1].ValidatorsFor() != own.URL {
		t.Errorf("round trip = %+v, want %+v and the second's validators its own url's", got, moved)
	}
	if entrySize(its[0]) != entrySize(entryItem{ID: "c", URL: moved.URL, ETag: `"y"`})+1+len(moved.ValidatorsURL) {
		t.Errorf("entrySize does not count the validators url")
	}
}

// The host item's state changes, checked without a table: what a write
// stores (Due, TTL, politeness) is decided here; the store tests on moto
// check that it is written and read back.

func TestActivate(t *testing.T) {
	due := time.UnixMilli(1_760_000_000_000)
	for _, tc := range []struct {
		name      string
		item      hostItem
		activated bool
		wantDue   int64
		wantTTL   int64
	}{
		{"no work: left as it is", hostItem{TTL: 99}, false, 0, 99},
		{"work, not due: into the index", hostItem{Tail: []entryItem{{ID: "a"}}, TTL: 99}, true, due.UnixMilli(), 0},
		{"work, already due: its due time kept", hostItem{Tail: []entryItem{{ID: "a"}}, Listed: "old", ListedDue: 5, TTL: 99}, false, 5, 0},
		{"work in chunks only", hostItem{Chunks: []chunkRef{{ID: "c", Count: 2}}, FirstChunkTaken: 1}, true, due.UnixMilli(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.item
			if got := h.activate(due, "new"); got != tc.activated || h.ListedDue != tc.wantDue || h.TTL != tc.wantTTL {
				t.Errorf("activate = %v, due %d ttl %d; want %v, %d, %d", got, h.ListedDue, h.TTL, tc.activated, tc.wantDue, tc.wantTTL)
			}
			if tc.activated && h.Listed != "new" {
				t.Errorf("activated into %q, want the entry given", h.Listed)
			}
		})
	}
}

func TestRelease(t *testing.T) {
	now := time.UnixMilli(1_760_000_000_000)
	next := now.Add(time.Minute)
	work := []entryItem{{ID: "a"}}
	for _, tc := range []struct {
		name     string
		item     hostItem
		c        hostqueue.Commit
		wantDue  int64 // 0 with work left: it needs a new entry (the commit's bucket add)
		wantTTL  int64
		attempts bool // Attempts kept
	}{
		{"work left: needs an entry at NextDue", hostItem{Tail: work, Listed: "b", ListedDue: 5, TTL: 9, Attempts: map[string]int{"a": 1}},
			hostqueue.Commit{NextDue: next}, 0, 0, true},
		{"work left, Continue: due as it was (no index write)", hostItem{Tail: work, Listed: "b", ListedDue: 5},
			hostqueue.Commit{NextDue: next, Continue: true}, 5, 0, false},
		{"work left, Continue, no entry: needs one", hostItem{Tail: work},
			hostqueue.Commit{NextDue: next, Continue: true}, 0, 0, false},
		{"drained: out of the index, expiring", hostItem{Listed: "b", ListedDue: 5, Attempts: map[string]int{"a": 1}},
			hostqueue.Commit{NextDue: next, IdleTTL: time.Hour}, 0, now.Add(time.Hour).Unix(), false},
		{"drained, Continue: released all the same", hostItem{Listed: "b", ListedDue: 5},
			hostqueue.Commit{NextDue: next, Continue: true, IdleTTL: time.Hour}, 0, now.Add(time.Hour).Unix(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.item
			h.release(tc.c, func() time.Time { return now })
			if h.ListedDue != tc.wantDue || (h.Listed != "") != (tc.wantDue != 0) || h.TTL != tc.wantTTL || (h.Attempts != nil) != tc.attempts {
				t.Errorf("entry %q due %d ttl %d attempts %v; want due %d, %d, kept %v", h.Listed, h.ListedDue, h.TTL, h.Attempts, tc.wantDue, tc.wantTTL, tc.attempts)
			}
			if h.needsEntry() != (h.pending() > 0 && tc.wantDue == 0) {
				t.Errorf("needsEntry = %v with %d pending", h.needsEntry(), h.pending())
			}
		})
	}
}

func TestRecordProgress(t *testing.T) {
	lf := time.UnixMilli(1_760_000_000_000)
	h := hostItem{LastFetch: lf.UnixMilli(), PauseUntil: 7, Errors: 3, FailingSince: 8, LastError: "old", Attempts: map[string]int{"x": 2}}
	long := strings.Repeat("é", maxLastError)
	h.recordProgress(hostqueue.Commit{
		Attempts: map[string]int{"a": 2, "done": 4, "zero": 0},
		State:    politeness.State{LastFetch: lf.Add(-time.Second), Errors: 1, FailingSince: lf, LastError: long},
	}, map[string]bool{"done": true})
	if h.LastFetch != lf.UnixMilli() {
		t.Errorf("an older LastFetch moved it back to %d", h.LastFetch)
	}
	if h.PauseUntil != 0 || h.Errors != 1 || h.FailingSince != lf.UnixMilli() {
		t.Errorf("pause %d errors %d failing since %d; want 0, 1, %d", h.PauseUntil, h.Errors, h.FailingSince, lf.UnixMilli())
	}
	if len(h.LastError) > maxLastError || !strings.HasPrefix(long, h.LastError) || !utf8.ValidString(h.LastError) {
		t.Errorf("LastError is %d bytes, want a valid prefix of at most %d", len(h.LastError), maxLastError)
	}
	if len(h.Attempts) != 1 || h.Attempts["a"] != 2 {
		t.Errorf("Attempts = %v, want only a: 2 (done and zero counters dropped, old ones replaced)", h.Attempts)
	}
	later := lf.Add(time.Hour)
	h.recordProgress(hostqueue.Commit{State: politeness.State{LastFetch: later, PauseUntil: later}}, nil)
	if h.LastFetch != later.UnixMilli() || h.PauseUntil != later.UnixMilli() || h.FailingSince != 0 || h.LastError != "" || h.Attempts != nil {
		t.Errorf("after a clean commit: %+v", h)
	}
}

func TestSuccessor(t *testing.T) {
	cur := &hostItem{Version: 4, Nonces: []string{"d", "c", "b", "a"}}
	next := cur.successor()
	if next.Version != 5 || len(next.Nonces) != nonceHistory || next.Nonces[1] != "d" || next.Nonces[0] == "d" {
		t.Errorf("successor: version %d nonces %v", next.Version, next.Nonces)
	}
	if cur.Version != 4 || !slices.Equal(cur.Nonces, []string{"d", "c", "b", "a"}) {
		t.Errorf("successor changed the item it was made from: %+v", cur)
	}
}

func TestMergeRobots(t *testing.T) {
	cur := hostItem{Robots: map[string]inlineRobots{"https://a.example": {Status: 404, FetchedAt: 1}}}
	next := cur
	next.mergeRobots(nil)
	next.mergeRobots(map[string]inlineRobots{"https://a.example": {Status: 200, FetchedAt: 2}, "https://b.example": {StoredApart: true, FetchedAt: 2}})
	if len(next.Robots) != 2 || next.Robots["https://a.example"].Status != 200 || !next.Robots["https://b.example"].StoredApart {
		t.Errorf("merged = %v", next.Robots)
	}
	if len(cur.Robots) != 1 || cur.Robots["https://a.example"].Status != 404 {
		t.Errorf("merging changed the item read: %v", cur.Robots)
	}
	var empty hostItem
	empty.mergeRobots(map[string]inlineRobots{"https://a.example": {Status: 404}})
	if len(empty.Robots) != 1 {
		t.Errorf("merge into no answers = %v", empty.Robots)
	}
}
