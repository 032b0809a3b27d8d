package dynamo

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/hostqueue"
)

// TestLayoutAttributeNames pins the stored attribute names: the item types'
// fields may be renamed, their names in the table may not (the items
// already stored, and the due-index on vs and due, read them).
func TestLayoutAttributeNames(t *testing.T) {
	entry := entryItem{ID: "i", URL: "u", ETag: "e", LastModified: "m", Hops: 1}
	for _, tc := range []struct {
		name string
		item any
		want []string
	}{
		{"host", hostItem{PK: "p", SK: "s", VirtualShard: 1, Due: 1, Version: 1, Nonces: []string{"n"},
			LastFetch: 1, PauseUntil: 1, Errors: 1, FailingSince: 1, LastError: "e", Tail: []entryItem{entry},
			Chunks: []chunkRef{{ID: "c", Count: 1}}, FirstChunkTaken: 1, Attempts: map[string]int{"i": 1}, TTL: 1,
			SpilledSinceEmpty: true, Robots: map[string]inlineRobots{"o": {Status: 200, GzipBody: []byte{1}, FetchedAt: 1, StoredApart: true}}},
			[]string{"at", "c", "co", "due", "er", "fs", "hc", "le", "lf", "n", "pk", "pu", "q", "rb", "sk", "ttl", "v", "vs"}},
		{"entry", entry, []string{"e", "h", "i", "m", "u"}},
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
}
