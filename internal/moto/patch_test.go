package moto_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dt "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	st "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/urldownloader/urldownloader/internal/moto"
)

// TestPatches checks that the patched moto (what Start runs) answers as
// stock moto does on what the patches touch: queue counts, receives, batch
// deletes (a bad handle fails alone, one deleted before succeeds), Query
// order on the table and on an index; and that a thousand messages go
// through quickly (stock moto took about a minute).
func TestPatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	db, q, _ := clients(t)

	t.Run("Query is sorted", func(t *testing.T) {
		table := hostsTable(t, db)
		rng := rand.New(rand.NewPCG(1, 2))
		dues := rng.Perm(50)
		for i, due := range dues {
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]dt.AttributeValue{
				"pk": s("h#" + strconv.Itoa(i%3)), "sk": s("c#" + strconv.Itoa(100+due)), "vs": n(int64(i % 2)), "due": n(int64(due)),
			}}); err != nil {
				t.Fatal(err)
			}
		}
		out, err := db.Query(ctx, &dynamodb.QueryInput{
			TableName: &table, IndexName: aws.String("due-index"),
			KeyConditionExpression:    aws.String("vs = :vs AND due <= :now"),
			ExpressionAttributeValues: map[string]dt.AttributeValue{":vs": n(0), ":now": n(1000)},
		})
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, it := range out.Items {
			v, _ := strconv.Atoi(it["due"].(*dt.AttributeValueMemberN).Value)
			got = append(got, v)
		}
		if len(got) != 25 || !slices.IsSorted(got) {
			t.Errorf("index query: dues %v, want the 25 of vs 0 in order", got)
		}
		out, err = db.Query(ctx, &dynamodb.QueryInput{
			TableName: &table, KeyConditionExpression: aws.String("pk = :pk"), ScanIndexForward: aws.Bool(false),
			ExpressionAttributeValues: map[string]dt.AttributeValue{":pk": s("h#1")},
		})
		if err != nil {
			t.Fatal(err)
		}
		var sks []string
		for _, it := range out.Items {
			sks = append(sks, it["sk"].(*dt.AttributeValueMemberS).Value)
		}
		if len(sks) != 17 || !slices.IsSortedFunc(sks, func(a, b string) int { return strings.Compare(b, a) }) {
			t.Errorf("table query backwards: %v, want 17 keys in descending order", sks)
		}
	})

	t.Run("SQS", func(t *testing.T) {
		out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(unique("patches"))})
		if err != nil {
			t.Fatal(err)
		}
		const total = 1000
		start := time.Now()
		// A loaded moto now and then resets a connection after it took a
		// batch; the SDK's retry then sends the batch again (seen in CI:
		// 1010 messages). Sends here are retried by the test itself, so
		// the count can allow for exactly the batches that may have landed
		// twice.
		var resent int
		for i := 0; i < total; i += 10 {
			var es []st.SendMessageBatchRequestEntry
			for j := 0; j < 10; j++ {
				es = append(es, st.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(strconv.Itoa(i + j))})
			}
			var err error
			for attempt := 0; attempt < 3; attempt++ {
				if attempt > 0 {
					resent += len(es)
				}
				if _, err = q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: out.QueueUrl, Entries: es}, func(o *sqs.Options) {
					o.RetryMaxAttempts = 1
				}); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []st.QueueAttributeName{st.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			t.Fatal(err)
		}
		inQueue, _ := strconv.Atoi(attrs.Attributes["ApproximateNumberOfMessages"])
		if inQueue < total || inQueue > total+resent {
			t.Fatalf("ApproximateNumberOfMessages = %d, want %d (up to %d more for batches sent again)", inQueue, total, resent)
		}
		seen := map[string]bool{}
		var handles []*string
		// Every message is received once (none is deleted before the
		// visibility timeout), duplicates of a resent batch included.
		for len(handles) < inQueue {
			r, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: out.QueueUrl, MaxNumberOfMessages: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Messages) == 0 {
				t.Fatalf("receive returned nothing after %d of %d", len(seen), total)
			}
			for _, m := range r.Messages {
				seen[*m.Body] = true
				handles = append(handles, m.ReceiptHandle)
			}
		}
		if len(seen) != total {
			t.Errorf("received %d distinct messages, want %d", len(seen), total)
		}
		for i := 0; i < len(handles); i += 8 {
			es := []st.DeleteMessageBatchRequestEntry{{Id: aws.String("bad"), ReceiptHandle: aws.String("not-a-handle")}}
			for j, h := range handles[i:min(i+8, len(handles))] {
				es = append(es, st.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: h})
			}
			if i > 0 {
				// A handle deleted before is deleted again without error.
				es = append(es, st.DeleteMessageBatchRequestEntry{Id: aws.String("again"), ReceiptHandle: handles[0]})
			}
			r, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: out.QueueUrl, Entries: es})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Failed) != 1 || aws.ToString(r.Failed[0].Id) != "bad" || len(r.Successful) != len(es)-1 {
				t.Fatalf("delete batch: %d ok, failed %+v; want all but the bad handle", len(r.Successful), r.Failed)
			}
		}
		attrs, err = q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []st.QueueAttributeName{st.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"} {
			if got := attrs.Attributes[a]; got != "0" {
				t.Errorf("%s = %s after deleting everything, want 0", a, got)
			}
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("%d messages took %s through the patched moto", total, d)
		}
	})
}

// TestStartStock starts moto as installed, without the patches.
func TestStartStock(t *testing.T) {
	srv, err := moto.StartWith(t.Context(), moto.Options{Stock: true})
	if err != nil {
		t.Fatalf("StartWith stock: %v", err)
	}
	defer srv.Close()
	if srv.PID() <= 0 {
		t.Errorf("PID = %d", srv.PID())
	}
}
