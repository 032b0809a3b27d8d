package billing_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/urldownloader/urldownloader/internal/billing"
	"github.com/urldownloader/urldownloader/internal/moto"
)

// TestMeterOnMoto runs real requests through the middleware and checks the
// units it bills: old item sizes (read on the side, or remembered), index
// puts and deletes, failed conditions, reads. Every way of learning the old
// item must bill the same.
func TestMeterOnMoto(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      billing.MeterOptions
		sideReads int
	}{
		{"side reads", billing.MeterOptions{}, 4},
		{"remember", billing.MeterOptions{Remember: true}, 1},
		{"remember, fresh tables", billing.MeterOptions{Remember: true, FreshTables: true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) { testMeter(t, tc.opts, tc.sideReads) })
	}
}

func testMeter(t *testing.T, opts billing.MeterOptions, wantSideReads int) {
	srv := moto.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := moto.AWSConfig(ctx, srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	raw := dynamodb.NewFromConfig(cfg)
	table := fmt.Sprintf("billing-%d", time.Now().UnixNano())
	_, err = raw.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("vs"), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String("due"), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String("due-index"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("vs"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("due"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	meter := billing.NewMeterWith(raw, func(_ string, key map[string]types.AttributeValue) string {
		if sk, ok := key["sk"].(*types.AttributeValueMemberS); ok {
			return sk.Value
		}
		return "?"
	}, opts)
	db := dynamodb.NewFromConfig(cfg, meter.Option)
	big := strings.Repeat("x", 3000) // 3 KB: 3 write units
	put := func(item map[string]types.AttributeValue, cond string) error {
		in := &dynamodb.PutItemInput{TableName: &table, Item: item}
		if cond != "" {
			in.ConditionExpression = &cond
		}
		_, err := db.PutItem(ctx, in)
		return err
	}
	key := map[string]types.AttributeValue{"pk": s("h#a"), "sk": s("h")}
	steps := []error{
		put(map[string]types.AttributeValue{"pk": s("h#a"), "sk": s("h"), "vs": n("1"), "due": n("5"), "b": s(big)}, ""), // 3 + index put 1
		put(map[string]types.AttributeValue{"pk": s("h#a"), "sk": s("h"), "vs": n("1"), "due": n("6")}, ""),              // old 3 KB: 3 + index 2
		put(map[string]types.AttributeValue{"pk": s("h#a"), "sk": s("h"), "vs": n("1")}, "attribute_not_exists(pk)"),     // failed: 1
		func() error {
			_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key})
			return err
		}(), // 1 + index delete 1
	}
	for i, err := range steps {
		var cf *types.ConditionalCheckFailedException
		if err != nil && !(i == 2 && errors.As(err, &cf)) {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Query(ctx, &dynamodb.QueryInput{
		TableName: &table, IndexName: aws.String("due-index"), KeyConditionExpression: aws.String("vs = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": n("1")},
	}); err != nil {
		t.Fatal(err)
	}

	u := meter.Usage()
	got := map[string]billing.Line{}
	for _, l := range u.Lines {
		got[l.Op+"/"+l.Kind] = l
	}
	want := map[string]billing.Line{
		"PutItem/h":             {Requests: 3, Failed: 1, WriteUnits: 3 + 3 + 1, IndexWriteUnits: 1 + 2},
		"DeleteItem/h":          {Requests: 1, WriteUnits: 1, IndexWriteUnits: 1},
		"GetItem/h":             {Requests: 1, ReadUnits: 0.5},
		"Query/query due-index": {Requests: 1, ReadUnits: 0.5},
	}
	for k, w := range want {
		g := got[k]
		if g.Requests != w.Requests || g.Failed != w.Failed || g.WriteUnits != w.WriteUnits || g.IndexWriteUnits != w.IndexWriteUnits || g.ReadUnits != w.ReadUnits {
			t.Errorf("%s = %+v, want requests %d failed %d wcu %v index %v rcu %v", k, g, w.Requests, w.Failed, w.WriteUnits, w.IndexWriteUnits, w.ReadUnits)
		}
	}
	if u.SideReadErrors != 0 {
		t.Errorf("side read errors: %d", u.SideReadErrors)
	}
	if n := meter.SideReads(); n != wantSideReads {
		t.Errorf("side reads = %d, want %d", n, wantSideReads)
	}
}

func TestSQSCounterOnMoto(t *testing.T) {
	srv := moto.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := moto.AWSConfig(ctx, srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := billing.NewSQSCounter(nil)
	q := sqs.NewFromConfig(cfg, c.Option)
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("billing-%d", time.Now().UnixNano()))})
	if err != nil {
		t.Fatal(err)
	}
	c.Name(*out.QueueUrl, "q")
	body := strings.Repeat("y", 100<<10) // 100 KB: billed as 2 requests
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: out.QueueUrl, MessageBody: &body}); err != nil {
		t.Fatal(err)
	}
	lines := map[string]billing.SQSLine{}
	for _, l := range c.Lines() {
		lines[l.Op+"/"+l.Queue] = l
	}
	if l := lines["SendMessage/q"]; l.Requests != 1 || l.Billed != 2 || l.Messages != 1 {
		t.Errorf("SendMessage/q = %+v, want 1 request billed as 2", l)
	}
	if l := lines["CreateQueue/"]; l.Requests != 1 {
		t.Errorf("CreateQueue = %+v, want 1 request", l)
	}
}

// TestMeterHotKey: the meter reports the most write units one partition
// key took in one second of its clock, across the items under that key,
// and counts throttling answers (none from moto).
func TestMeterHotKey(t *testing.T) {
	srv := moto.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := moto.AWSConfig(ctx, srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	raw := dynamodb.NewFromConfig(cfg)
	table := fmt.Sprintf("billing-hot-%d", time.Now().UnixNano())
	if _, err := raw.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
	}); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_760_000_000, 0)
	meter := billing.NewMeterWith(raw, nil, billing.MeterOptions{Remember: true, FreshTables: true, Now: func() time.Time { return now }})
	db := dynamodb.NewFromConfig(cfg, meter.Option)
	put := func(pk, sk string, bytes int) {
		t.Helper()
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk},
			"sk": &types.AttributeValueMemberS{Value: sk},
			"b":  &types.AttributeValueMemberS{Value: strings.Repeat("x", bytes)},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	// Second one: "hot" takes 2 + 3 units on two items, "cold" 1.
	put("hot", "a", 1500)
	put("hot", "b", 2500)
	put("cold", "a", 10)
	// Second two: "hot" 1 unit, "cold" 4.
	now = now.Add(time.Second)
	put("hot", "a", 10)
	put("cold", "b", 3500)
	u := meter.Usage()
	if u.HotKey != "hot" || u.HotKeyWriteUnits != 5 {
		t.Errorf("hot key %q at %.0f write units a second, want \"hot\" at 5", u.HotKey, u.HotKeyWriteUnits)
	}
	if u.Throttled != 0 || u.ThrottleFailures != 0 {
		t.Errorf("%d throttled attempts, %d requests failed throttled; moto throttles none", u.Throttled, u.ThrottleFailures)
	}
}
