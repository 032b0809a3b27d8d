package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
)

// The ingest CPU benchmark's batch: what the template's event source
// mapping delivers at most (1000 records), one URL per record, over 200
// hosts.
const (
	ingestBatchRecords = 1000
	ingestBatchHosts   = 200
)

// ingestEvent builds an SQS event of records one-URL messages over hosts.
func ingestEvent(records, hosts int) events.SQSEvent {
	ev := events.SQSEvent{}
	for i := 0; i < records; i++ {
		h := i % hosts
		body, _ := json.Marshal(map[string]string{
			"url": fmt.Sprintf("http://127.0.%d.%d:8080/page/%d", h/250, h%250+2, i),
		})
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), ReceiptHandle: "rh" + strconv.Itoa(i),
			Body: string(body), EventSource: "aws:sqs", AWSRegion: "us-east-1",
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:input",
			Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
		})
	}
	return ev
}

// benchmarkIngest measures the ingest handler's CPU per batch: decoding
// the records, validating and normalising URLs, grouping by host and the
// store's read-modify-write of each host (item encoding and decoding), on
// an in-memory DynamoDB fake. It leaves out what the fake cannot show: the
// SDK's request signing, JSON and HTTP, and the network wait.
func benchmarkIngest(b *testing.B) {
	ev := ingestEvent(ingestBatchRecords, ingestBatchHosts)
	p := params.Defaults()
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		store := dynamo.New(newMemDB(), "bench", nowFixed)
		h := &ingesthandler.Handler{
			Ingester: &hostqueue.Ingester{Store: store, Publisher: nopPublisher{}, Now: nowFixed},
			Params:   func(context.Context) params.Params { return p },
			Log:      log,
		}
		resp, err := h.HandleSQS(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			b.Fatalf("ingest: %v, %d failures", err, len(resp.BatchItemFailures))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ingestBatchRecords), "ns/url")
}

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, []result.Result) error { return nil }

// memDB is an in-memory stand-in for the five DynamoDB calls the store
// makes, with the two conditions of its host writes.
type memDB struct {
	mu    sync.Mutex
	items map[string]map[string]types.AttributeValue
}

var _ dynamo.Client = (*memDB)(nil)

func newMemDB() *memDB { return &memDB{items: map[string]map[string]types.AttributeValue{}} }

func memKey(k map[string]types.AttributeValue) string {
	pk, _ := k["pk"].(*types.AttributeValueMemberS)
	sk, _ := k["sk"].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil {
		return ""
	}
	return pk.Value + "\x00" + sk.Value
}

func (m *memDB) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &dynamodb.GetItemOutput{Item: m.items[memKey(in.Key)]}, nil
}

func (m *memDB) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := memKey(in.Item)
	old, exists := m.items[k]
	if c := in.ConditionExpression; c != nil {
		fail := false
		switch *c {
		case "attribute_not_exists(pk)":
			fail = exists
		case "v = :v":
			ov, _ := old["v"].(*types.AttributeValueMemberN)
			want, _ := in.ExpressionAttributeValues[":v"].(*types.AttributeValueMemberN)
			fail = ov == nil || want == nil || ov.Value != want.Value
		}
		if fail {
			return nil, &types.ConditionalCheckFailedException{}
		}
	}
	m.items[k] = in.Item
	return &dynamodb.PutItemOutput{}, nil
}

func (m *memDB) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.items, memKey(in.Key))
	return &dynamodb.DeleteItemOutput{}, nil
}

// UpdateItem is the due buckets' add: it records the bucket's key and
// takes every add (a bucket never fills or closes within a batch here).
func (m *memDB) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := memKey(in.Key)
	if m.items[k] == nil {
		m.items[k] = in.Key
	}
	return &dynamodb.UpdateItemOutput{}, nil
}

// TransactWriteItems is refused: the ingest benchmark appends plain URLs,
// whose writes are never transactions (only refresh changes are).
func (m *memDB) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return nil, errors.New("memDB: no transactions")
}

func (m *memDB) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return &dynamodb.QueryOutput{}, nil
}
