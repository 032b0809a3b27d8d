package moto_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
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
		name := unique("patches")
		out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		// The counts after deleting everything are moto's, without the
		// strict layer's redelivered copies.
		motoStock(t, moto.KnobSQSRedeliverShare, 0)(name)
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
		notVisible := func() int {
			a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []st.QueueAttributeName{st.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
			if err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.Atoi(a.Attributes["ApproximateNumberOfMessagesNotVisible"])
			return n
		}
		// Every message is received once (none is deleted before the
		// visibility timeout), duplicates of a resent batch included. A
		// receive whose answer a reset connection lost (the SDK then
		// asks again) leaves its messages in flight, invisible for the
		// visibility timeout, as on SQS: those are accounted for, a whole
		// receive of them at a time, and nothing else may be missing.
		lost := 0
		for len(handles) < inQueue {
			r, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: out.QueueUrl, MaxNumberOfMessages: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Messages) == 0 {
				lost = inQueue - len(handles)
				if nv := notVisible(); nv != inQueue || lost > 20 {
					t.Fatalf("receive returned nothing after %d of %d, %d in flight: want every message received, or in flight after a lost answer (at most 20)", len(seen), total, nv)
				}
				t.Logf("%d messages in flight after a receive whose answer was lost", lost)
				break
			}
			for _, m := range r.Messages {
				seen[*m.Body] = true
				handles = append(handles, m.ReceiptHandle)
			}
		}
		if len(seen) < total-lost || len(seen) > total {
			t.Errorf("received %d distinct messages, want %d (%d lost in flight)", len(seen), total, lost)
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
		for a, want := range map[string]int{"ApproximateNumberOfMessages": 0, "ApproximateNumberOfMessagesNotVisible": lost} {
			if got := attrs.Attributes[a]; got != strconv.Itoa(want) {
				t.Errorf("%s = %s after deleting everything received, want %d", a, got, want)
			}
		}
		// How long this takes is the benchmark's (make bench
		// -stock-moto compares), not a test's: the machine may be loaded.
		t.Logf("%d messages through the patched moto in %s", total, time.Since(start))
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

// TestDynamoDBOneAtATime: updates of one item from clients without the
// client-side lock (atomic.go), as separate processes send them, each
// appending to three lists and counting in one UpdateItem under a
// condition: none is lost, and the lists keep one length. Stock moto lost
// some of them (lists of different lengths, a count short).
func TestDynamoDBOneAtATime(t *testing.T) {
	cfg, err := moto.AWSConfig(t.Context(), moto.Shared(t).Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	cfg.APIOptions = nil // as a process of its own would send them
	db := dynamodb.NewFromConfig(cfg)
	table := hostsTable(t, db)
	key := map[string]dt.AttributeValue{"pk": &dt.AttributeValueMemberS{Value: "d#0"}, "sk": &dt.AttributeValueMemberS{Value: "bucket"}}
	one := func(v string) *dt.AttributeValueMemberL {
		return &dt.AttributeValueMemberL{Value: []dt.AttributeValue{&dt.AttributeValueMemberS{Value: v}}}
	}
	const writers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				v := strconv.Itoa(w*each + i)
				_, err := db.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
					TableName:           &table,
					Key:                 key,
					UpdateExpression:    aws.String("SET h = list_append(if_not_exists(h, :none), :a), hv = list_append(if_not_exists(hv, :none), :a), hd = list_append(if_not_exists(hd, :none), :a) ADD c :one"),
					ConditionExpression: aws.String("attribute_not_exists(c) OR c < :cap"),
					ExpressionAttributeValues: map[string]dt.AttributeValue{
						":none": &dt.AttributeValueMemberL{Value: []dt.AttributeValue{}},
						":a":    one(v),
						":one":  &dt.AttributeValueMemberN{Value: "1"},
						":cap":  &dt.AttributeValueMemberN{Value: "100000"},
					},
				})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("update: %v", err)
	}
	out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	count := out.Item["c"].(*dt.AttributeValueMemberN).Value
	var lens []int
	for _, a := range []string{"h", "hv", "hd"} {
		lens = append(lens, len(out.Item[a].(*dt.AttributeValueMemberL).Value))
	}
	if want := strconv.Itoa(writers * each); count != want || slices.ContainsFunc(lens, func(n int) bool { return n != writers*each }) {
		t.Errorf("after %d updates: count %s, lists of %v, want %s and %d each", writers*each, count, lens, want, writers*each)
	}
}
