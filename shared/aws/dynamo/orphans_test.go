package dynamo_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// TestDrainCollectsOldOrphanChunks: chunk items nobody references (left by
// a write that crashed between the chunk and the host item) are deleted
// when the host's queue drains, once they are old enough that no append in
// progress can own them; young ones are kept.
func TestDrainCollectsOldOrphanChunks(t *testing.T) {
	e := newEnv(t)
	now := t0
	store := dynamo.New(e.db, e.table, func() time.Time { return now })
	const host = "orphans.example"
	put := func(sk string, at time.Time) {
		t.Helper()
		_, err := e.db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &e.table, Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "h#" + host},
			"sk": &types.AttributeValueMemberS{Value: sk},
			"q":  &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
			"t":  &types.AttributeValueMemberN{Value: strconv.FormatInt(at.UnixMilli(), 10)},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A queue big enough to spill, so the host is marked as having chunks.
	if _, err := store.Append(t.Context(), hostqueue.AppendRequest{Key: host, Entries: entries("a", 0, 10, 200), Limit: 100, Due: now}); err != nil {
		t.Fatal(err)
	}
	put("c#oldorphan", now.Add(-2*time.Hour))
	put("c#neworphan", now.Add(-time.Minute))

	h := e.load(host, 100)
	var done []string
	for _, en := range h.Head {
		done = append(done, en.ID)
	}
	if _, err := store.Commit(t.Context(), host, hostqueue.Commit{Done: done, Release: true, IdleTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	got := e.chunkSKs(host)
	if len(got) != 1 || got[0] != "c#neworphan" {
		t.Errorf("chunks after the drain: %v, want only the young orphan c#neworphan", got)
	}
}
