package moto_test

// These tests pin the moto behaviours that NOTES.md describes, where the
// project's code depends on them or must not: when a moto upgrade changes
// one, a test here fails and NOTES.md needs the same change.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dt "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	st "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmt "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"

	"github.com/urldownloader/urldownloader/internal/moto"
)

var seq atomic.Int64

// unique names a resource for this test alone on the shared server.
func unique(base string) string {
	return fmt.Sprintf("%s-%d-%d", base, time.Now().UnixNano()%1e9, seq.Add(1))
}

func s(v string) dt.AttributeValue { return &dt.AttributeValueMemberS{Value: v} }
func n(v int64) dt.AttributeValue  { return &dt.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)} }

// hostsTable creates a table shaped like template.yaml's HostsTable.
func hostsTable(t *testing.T, db *dynamodb.Client) string {
	t.Helper()
	name := unique("behaviour")
	_, err := db.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: dt.BillingModePayPerRequest,
		AttributeDefinitions: []dt.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: dt.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: dt.ScalarAttributeTypeS},
			{AttributeName: aws.String("vs"), AttributeType: dt.ScalarAttributeTypeN},
			{AttributeName: aws.String("due"), AttributeType: dt.ScalarAttributeTypeN},
		},
		KeySchema: []dt.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: dt.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: dt.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []dt.GlobalSecondaryIndex{{
			IndexName: aws.String("due-index"),
			KeySchema: []dt.KeySchemaElement{
				{AttributeName: aws.String("vs"), KeyType: dt.KeyTypeHash},
				{AttributeName: aws.String("due"), KeyType: dt.KeyTypeRange},
			},
			Projection: &dt.Projection{ProjectionType: dt.ProjectionTypeKeysOnly},
		}},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	motoStock(t, moto.KnobDynamoStaleReadMs, 0, moto.KnobDynamoTTL, false)(name)
	return name
}

// motoStock returns a function that turns the strict layer's given rules
// (knob, value pairs) off for one table or queue: these tests pin moto's own
// answers (what NOTES.md says of moto), strict_test.go tests the layer.
func motoStock(t *testing.T, kv ...any) func(name string) {
	return func(name string) {
		t.Helper()
		knobs := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			knobs[kv[i].(string)] = kv[i+1]
		}
		set := moto.SetStrictTable
		if _, ok := knobs[moto.KnobSQSRedeliverShare]; ok {
			set = moto.SetStrictQueue
		}
		if err := set(t.Context(), moto.Shared(t).Endpoint, name, knobs); err != nil {
			t.Fatal(err)
		}
	}
}

func clients(t *testing.T) (*dynamodb.Client, *sqs.Client, *ssm.Client) {
	t.Helper()
	cfg, err := moto.AWSConfig(t.Context(), moto.Shared(t).Endpoint)
	if err != nil {
		t.Fatalf("AWSConfig: %v", err)
	}
	return dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
}

func TestDynamoDBBehaviour(t *testing.T) {
	db, _, _ := clients(t)
	ctx := t.Context()
	table := hostsTable(t, db)
	put := func(item map[string]dt.AttributeValue) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item})
		return err
	}

	t.Run("TTL is recorded but never expires items", func(t *testing.T) {
		if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               &table,
			TimeToLiveSpecification: &dt.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)},
		}); err != nil {
			t.Fatalf("UpdateTimeToLive: %v", err)
		}
		d, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
		if err != nil {
			t.Fatalf("DescribeTimeToLive: %v", err)
		}
		if d.TimeToLiveDescription.TimeToLiveStatus != dt.TimeToLiveStatusEnabled || aws.ToString(d.TimeToLiveDescription.AttributeName) != "ttl" {
			t.Errorf("TTL = %+v, want ENABLED on ttl", d.TimeToLiveDescription)
		}
		key := map[string]dt.AttributeValue{"pk": s("expired"), "sk": s("h")}
		if err := put(map[string]dt.AttributeValue{"pk": s("expired"), "sk": s("h"), "ttl": n(time.Now().Add(-time.Hour).Unix())}); err != nil {
			t.Fatal(err)
		}
		g, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if g.Item == nil {
			t.Error("moto now hides or deletes expired items: update NOTES.md")
		}
	})

	t.Run("GSI is sparse, KEYS_ONLY and immediately consistent", func(t *testing.T) {
		if err := put(map[string]dt.AttributeValue{"pk": s("h#a"), "sk": s("h"), "vs": n(7), "due": n(100), "data": s("x")}); err != nil {
			t.Fatal(err)
		}
		if err := put(map[string]dt.AttributeValue{"pk": s("h#b"), "sk": s("h"), "data": s("no vs: not indexed")}); err != nil {
			t.Fatal(err)
		}
		q, err := db.Query(ctx, &dynamodb.QueryInput{
			TableName: &table, IndexName: aws.String("due-index"),
			KeyConditionExpression:    aws.String("vs = :vs AND due <= :now"),
			ExpressionAttributeValues: map[string]dt.AttributeValue{":vs": n(7), ":now": n(1000)},
		})
		if err != nil {
			t.Fatalf("Query due-index: %v", err)
		}
		if len(q.Items) != 1 {
			t.Fatalf("Query due-index = %d items, want 1", len(q.Items))
		}
		// KEYS_ONLY: the index keys plus the table keys, nothing else.
		if _, ok := q.Items[0]["data"]; ok || len(q.Items[0]) != 4 {
			t.Errorf("KEYS_ONLY item has %d attributes: %v", len(q.Items[0]), q.Items[0])
		}
		_, err = db.Query(ctx, &dynamodb.QueryInput{
			TableName: &table, IndexName: aws.String("due-index"), ConsistentRead: aws.Bool(true),
			KeyConditionExpression:    aws.String("vs = :vs"),
			ExpressionAttributeValues: map[string]dt.AttributeValue{":vs": n(7)},
		})
		if err == nil {
			t.Error("a consistent read on a GSI succeeded; AWS refuses it")
		}
	})

	t.Run("failed condition is ConditionalCheckFailedException with the old item", func(t *testing.T) {
		key := map[string]dt.AttributeValue{"pk": s("h#cond"), "sk": s("h")}
		if err := put(map[string]dt.AttributeValue{"pk": s("h#cond"), "sk": s("h"), "v": n(1)}); err != nil {
			t.Fatal(err)
		}
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &table, Key: key,
			UpdateExpression:                    aws.String("SET v = :new"),
			ConditionExpression:                 aws.String("v = :old"),
			ExpressionAttributeValues:           map[string]dt.AttributeValue{":new": n(3), ":old": n(2)},
			ReturnValuesOnConditionCheckFailure: dt.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *dt.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			t.Fatalf("UpdateItem error = %v, want *types.ConditionalCheckFailedException", err)
		}
		if got := ccf.Item["v"]; got == nil || got.(*dt.AttributeValueMemberN).Value != "1" {
			t.Errorf("exception Item v = %v, want the old value 1", got)
		}
	})

	t.Run("cancelled transaction lists a reason per item", func(t *testing.T) {
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []dt.TransactWriteItem{
			{ConditionCheck: &dt.ConditionCheck{TableName: &table, Key: map[string]dt.AttributeValue{"pk": s("h#cond"), "sk": s("h")}, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
			{Put: &dt.Put{TableName: &table, Item: map[string]dt.AttributeValue{"pk": s("h#tx"), "sk": s("h")}}},
		}})
		var tce *dt.TransactionCanceledException
		if !errors.As(err, &tce) {
			t.Fatalf("TransactWriteItems error = %v, want *types.TransactionCanceledException", err)
		}
		var codes []string
		for _, r := range tce.CancellationReasons {
			codes = append(codes, aws.ToString(r.Code))
		}
		if strings.Join(codes, ",") != "ConditionalCheckFailed,None" {
			t.Errorf("CancellationReasons = %v, want [ConditionalCheckFailed None]", codes)
		}
	})

	t.Run("conditional writes are atomic under concurrency", func(t *testing.T) {
		key := map[string]dt.AttributeValue{"pk": s("h#race"), "sk": s("h")}
		if err := put(map[string]dt.AttributeValue{"pk": s("h#race"), "sk": s("h"), "v": n(0)}); err != nil {
			t.Fatal(err)
		}
		var won atomic.Int64
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				for range 40 {
					g, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
					if err != nil {
						t.Error(err)
						return
					}
					old := g.Item["v"].(*dt.AttributeValueMemberN).Value
					v, _ := strconv.ParseInt(old, 10, 64)
					_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
						TableName: &table, Key: key,
						UpdateExpression:          aws.String("SET v = :new"),
						ConditionExpression:       aws.String("v = :old"),
						ExpressionAttributeValues: map[string]dt.AttributeValue{":new": n(v + 1), ":old": n(v)},
					})
					var ccf *dt.ConditionalCheckFailedException
					switch {
					case err == nil:
						won.Add(1)
					case !errors.As(err, &ccf):
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		g, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Item["v"].(*dt.AttributeValueMemberN).Value; got != strconv.FormatInt(won.Load(), 10) {
			t.Errorf("%d conditional updates succeeded but the counter is %s: moto lost an update", won.Load(), got)
		}
	})

	t.Run("item size limit is 405000 bytes, not 409600", func(t *testing.T) {
		big := func(size int) map[string]dt.AttributeValue {
			return map[string]dt.AttributeValue{"pk": s("h#big"), "sk": s("h"), "b": s(strings.Repeat("x", size))}
		}
		if err := put(big(400_000)); err != nil {
			t.Errorf("400,000-byte item refused: %v", err)
		}
		if err := put(big(405_000)); err == nil {
			t.Error("405,000-byte item accepted: moto's limit moved, update NOTES.md")
		}
	})

	t.Run("leniencies: batch of 26 writes and a wrongly typed index key pass", func(t *testing.T) {
		var reqs []dt.WriteRequest
		for i := range 26 {
			reqs = append(reqs, dt.WriteRequest{PutRequest: &dt.PutRequest{Item: map[string]dt.AttributeValue{"pk": s(fmt.Sprint("bw", i)), "sk": s("h")}}})
		}
		if _, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]dt.WriteRequest{table: reqs}}); err != nil {
			t.Logf("moto now refuses 26 writes in a batch, as AWS does: update NOTES.md (%v)", err)
		}
		if err := put(map[string]dt.AttributeValue{"pk": s("h#typed"), "sk": s("h"), "vs": s("not a number")}); err != nil {
			t.Logf("moto now refuses a string in a numeric index key, as AWS does: update NOTES.md (%v)", err)
		}
	})

	t.Run("consumed capacity is always 1", func(t *testing.T) {
		out, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: &table, ReturnConsumedCapacity: dt.ReturnConsumedCapacityTotal,
			Item: map[string]dt.AttributeValue{"pk": s("h#cap"), "sk": s("h"), "b": s(strings.Repeat("x", 5000))},
		})
		if err != nil {
			t.Fatal(err)
		}
		// AWS bills 5 write units for a 5 KB item; moto says 1.
		if out.ConsumedCapacity == nil || aws.ToFloat64(out.ConsumedCapacity.CapacityUnits) != 1 {
			t.Logf("moto's ConsumedCapacity changed: %+v; update NOTES.md", out.ConsumedCapacity)
		}
	})
}

func TestSQSBehaviour(t *testing.T) {
	_, q, _ := clients(t)
	ctx := t.Context()
	create := func(name string, attrs map[string]string) string {
		t.Helper()
		out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			t.Fatalf("CreateQueue %s: %v", name, err)
		}
		return aws.ToString(out.QueueUrl)
	}

	t.Run("messages up to 1 MiB, batches up to 1 MiB in total", func(t *testing.T) {
		url := create(unique("size"), nil)
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(strings.Repeat("x", 1<<20))}); err != nil {
			t.Errorf("1 MiB message refused: %v", err)
		}
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(strings.Repeat("x", 1<<20+1))}); err == nil {
			t.Error("1 MiB + 1 message accepted")
		}
		entries := make([]st.SendMessageBatchRequestEntry, 10)
		for i := range entries {
			entries[i] = st.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(strings.Repeat("x", 110<<10))}
		}
		_, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
		var api smithy.APIError
		if !errors.As(err, &api) || !strings.Contains(api.ErrorCode(), "BatchRequestTooLong") {
			t.Errorf("1.1 MiB batch: error %v, want BatchRequestTooLong", err)
		}
		entries = append(entries[:10:10], st.SendMessageBatchRequestEntry{Id: aws.String("10"), MessageBody: aws.String("x")})
		for i := range entries {
			entries[i].MessageBody = aws.String("x")
		}
		if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries}); err == nil {
			t.Error("batch of 11 entries accepted")
		}
	})

	t.Run("long polling returns a message sent during the wait", func(t *testing.T) {
		url := create(unique("poll"), nil)
		go func() {
			time.Sleep(300 * time.Millisecond)
			_, _ = q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("late")})
		}()
		start := time.Now()
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) != 1 || time.Since(start) > 4*time.Second {
			t.Errorf("long poll got %d messages after %v, want 1 soon after it was sent", len(out.Messages), time.Since(start))
		}
	})

	t.Run("redrive moves a message on the receive after maxReceiveCount", func(t *testing.T) {
		dlq := create(unique("dlq"), nil)
		attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &dlq, AttributeNames: []st.QueueAttributeName{st.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		src := create(unique("src"), map[string]string{
			"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":2}`, attrs.Attributes["QueueArn"]),
		})
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &src, MessageBody: aws.String("poison")}); err != nil {
			t.Fatal(err)
		}
		receive := func(url string) int {
			out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range out.Messages {
				// ReceiveMessage's VisibilityTimeout 0 is not sent (the SDK
				// omits zero values), so release the message explicitly.
				if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
					t.Fatal(err)
				}
			}
			return len(out.Messages)
		}
		got := []int{receive(src), receive(src), receive(src), receive(dlq)}
		if fmt.Sprint(got) != "[1 1 0 1]" {
			t.Errorf("receives from src, src, src, dlq = %v, want [1 1 0 1]", got)
		}
	})

	t.Run("a redrive policy needs an existing DLQ", func(t *testing.T) {
		_, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(unique("orphan")), Attributes: map[string]string{
			"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":"arn:aws:sqs:%s:%s:no-such-queue","maxReceiveCount":5}`, moto.Region, moto.AccountID),
		}})
		if err == nil {
			t.Error("queue with a missing DLQ created")
		}
	})

	t.Run("CreateQueue is idempotent only with the same attributes", func(t *testing.T) {
		name := unique("again")
		create(name, map[string]string{"VisibilityTimeout": "360"})
		create(name, map[string]string{"VisibilityTimeout": "360"})
		_, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: map[string]string{"VisibilityTimeout": "10"}})
		var exists *st.QueueNameExists
		if !errors.As(err, &exists) {
			t.Errorf("CreateQueue with other attributes: %v, want *types.QueueNameExists", err)
		}
	})
}

func TestSSMBehaviour(t *testing.T) {
	_, _, p := clients(t)
	ctx := t.Context()
	path := "/urldownloader/" + unique("behaviour") + "/"
	// The seeds overwrite: under load the SDK may retry a put whose first
	// attempt landed, and a retry without Overwrite then fails with
	// ParameterAlreadyExists (seen in CI).
	for i := range 12 {
		if _, err := p.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(fmt.Sprintf("%sP%02d", path, i)), Value: aws.String("v"), Type: ssmt.ParameterTypeString, Overwrite: aws.Bool(true)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(path + "sub/deep"), Value: aws.String("v"), Type: ssmt.ParameterTypeString, Overwrite: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}

	t.Run("overwriting needs Overwrite", func(t *testing.T) {
		_, err := p.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(path + "P00"), Value: aws.String("w"), Type: ssmt.ParameterTypeString})
		var exists *ssmt.ParameterAlreadyExists
		if !errors.As(err, &exists) {
			t.Errorf("PutParameter over an existing one: %v, want *types.ParameterAlreadyExists", err)
		}
	})

	t.Run("GetParametersByPath pages by 10, MaxResults above 10 is refused", func(t *testing.T) {
		for _, path := range []string{path, strings.TrimSuffix(path, "/")} {
			out, err := p.GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: &path})
			if err != nil {
				t.Fatalf("GetParametersByPath %s: %v", path, err)
			}
			if len(out.Parameters) != 10 || out.NextToken == nil {
				t.Errorf("first page of %s: %d parameters, next token %v; want 10 and a token", path, len(out.Parameters), out.NextToken != nil)
			}
		}
		if _, err := p.GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: &path, MaxResults: aws.Int32(11)}); err == nil {
			t.Error("MaxResults 11 accepted")
		}
		count := func(recursive bool) int {
			total := 0
			pages := ssm.NewGetParametersByPathPaginator(p, &ssm.GetParametersByPathInput{Path: &path, Recursive: aws.Bool(recursive)})
			for pages.HasMorePages() {
				out, err := pages.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				total += len(out.Parameters)
			}
			return total
		}
		if got := count(false); got != 12 {
			t.Errorf("non-recursive: %d parameters, want 12", got)
		}
		if got := count(true); got != 13 {
			t.Errorf("recursive: %d parameters, want 13", got)
		}
	})

	t.Run("GetParameters reports missing names as invalid", func(t *testing.T) {
		out, err := p.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{path + "P01", path + "missing"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Parameters) != 1 || len(out.InvalidParameters) != 1 {
			t.Errorf("GetParameters = %d found, invalid %v; want 1 and the missing name", len(out.Parameters), out.InvalidParameters)
		}
	})
}
