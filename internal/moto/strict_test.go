package moto_test

// These tests check the strict layer (strict.go): each rule refuses what AWS
// refuses and passes what AWS passes, on the real patched server through the
// real SDK. Rate rules stop their resource's clock (moto.SetClock) so that
// no outcome depends on the machine's speed.

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dt "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	st "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmt "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"

	"github.com/urldownloader/urldownloader/internal/moto"
)

// once makes a call without the SDK's retries of AWS's errors, so a
// throttle is seen as is; a broken connection (a loaded machine's) is
// still tried again.
func onceDB(o *dynamodb.Options) { o.Retryer = connRetryer() }
func onceSSM(o *ssm.Options)     { o.Retryer = connRetryer() }

func connRetryer() aws.Retryer {
	return retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = 4
		so.RateLimiter = ratelimit.None
		so.Retryables = []retry.IsErrorRetryable{retry.RetryableConnectionError{}}
	})
}

func TestStrictDefaults(t *testing.T) {
	// AWS's documented values (see NOTES.md for the pages).
	want := map[string]any{
		moto.KnobSQSValidChars:       true,
		moto.KnobSQSByteSize:         true,
		moto.KnobSQSRedeliverShare:   0.005,
		moto.KnobDynamoPartitionWCU:  1000,
		moto.KnobDynamoPartitionRCU:  3000,
		moto.KnobDynamoOnDemandWCU:   4000,
		moto.KnobDynamoOnDemandRCU:   12000,
		moto.KnobDynamoStaleReadMs:   1000,
		moto.KnobDynamoTTL:           true,
		moto.KnobDynamoTTLMaxDelayS:  48 * 3600,
		moto.KnobSSMTPS:              40,
		moto.KnobSSMHigherThroughput: false,
		moto.KnobSSMHigherTPS:        10000,
		moto.KnobSSMByPathHigherTPS:  100,
	}
	if !maps.Equal(normal(moto.DefaultStrict), normal(want)) {
		t.Errorf("DefaultStrict = %v, want %v", moto.DefaultStrict, want)
	}
	status, err := moto.Strict(t.Context(), moto.Shared(t).Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(normal(status.Defaults), normal(want)) {
		t.Errorf("the server's defaults = %v, want %v", status.Defaults, want)
	}
	for k, v := range want {
		if normal(map[string]any{k: status.Config[k]})[k] != normal(map[string]any{k: v})[k] {
			t.Errorf("the server runs %s = %v, want the default %v (is MOTO_STRICT_* set?)", k, status.Config[k], v)
		}
	}
}

// normal makes JSON numbers and Go numbers compare equal.
func normal(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		switch x := v.(type) {
		case int:
			out[k] = strconv.FormatFloat(float64(x), 'g', -1, 64)
		case float64:
			out[k] = strconv.FormatFloat(x, 'g', -1, 64)
		default:
			out[k] = strings.ToLower(strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(fmtAny(v), "\n", ""), " ", "")))
		}
	}
	return out
}

func fmtAny(v any) string {
	switch x := v.(type) {
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	}
	return "?"
}

func strictQueue(t *testing.T, q *sqs.Client, attrs map[string]string) (name, url string) {
	t.Helper()
	name = unique("strict")
	out, err := q.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return name, aws.ToString(out.QueueUrl)
}

func TestStrictSQSCharacters(t *testing.T) {
	_, q, _ := clients(t)
	ctx := t.Context()
	_, url := strictQueue(t, q, nil)
	for _, body := range []string{"a\uFFFEb", "\uFFFF", "nul\x00", "bell\x07", "\x1f"} {
		_, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body)})
		var bad *st.InvalidMessageContents
		if !errors.As(err, &bad) {
			t.Errorf("SendMessage %q: %v, want InvalidMessageContents", body, err)
		}
	}
	valid := "tab\t nl\n cr\r \u0020\uD7FF\uE000\uFFFD\U00010000\U0010FFFF é"
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(valid)}); err != nil {
		t.Fatalf("SendMessage of the allowed characters: %v", err)
	}
	got, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
	if err != nil || len(got.Messages) != 1 || aws.ToString(got.Messages[0].Body) != valid {
		t.Fatalf("receive the valid body: %v %+v", err, got)
	}

	// A batch fails the bad entry alone.
	out, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: []st.SendMessageBatchRequestEntry{
		{Id: aws.String("ok"), MessageBody: aws.String("fine")},
		{Id: aws.String("bad"), MessageBody: aws.String("not \uFFFE fine")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Successful) != 1 || aws.ToString(out.Successful[0].Id) != "ok" ||
		len(out.Failed) != 1 || aws.ToString(out.Failed[0].Id) != "bad" || aws.ToString(out.Failed[0].Code) != "InvalidMessageContents" || !out.Failed[0].SenderFault {
		t.Errorf("batch: successful %+v, failed %+v; want ok sent, bad failed with InvalidMessageContents", out.Successful, out.Failed)
	}
}

func TestStrictSQSSize(t *testing.T) {
	_, q, _ := clients(t)
	ctx := t.Context()
	_, url := strictQueue(t, q, map[string]string{"MaximumMessageSize": "1024"})
	send := func(body string, attrs map[string]st.MessageAttributeValue) error {
		_, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageAttributes: attrs})
		return err
	}
	if err := send(strings.Repeat("a", 1024), nil); err != nil {
		t.Errorf("1,024 bytes to a queue of 1,024: %v", err)
	}
	// 600 characters, 1,200 bytes: moto alone counts characters and takes it.
	if err := send(strings.Repeat("é", 600), nil); err == nil || !strings.Contains(err.Error(), "shorter than 1024") {
		t.Errorf("1,200 bytes in 600 characters: %v, want refused", err)
	}
	// Attributes count too.
	attr := map[string]st.MessageAttributeValue{"k": {DataType: aws.String("String"), StringValue: aws.String(strings.Repeat("v", 100))}}
	if err := send(strings.Repeat("a", 1000), attr); err == nil {
		t.Error("1,000 bytes of body and 107 of attribute: accepted, want refused")
	}
	out, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: []st.SendMessageBatchRequestEntry{
		{Id: aws.String("small"), MessageBody: aws.String("x")},
		{Id: aws.String("big"), MessageBody: aws.String(strings.Repeat("é", 600))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Successful) != 1 || len(out.Failed) != 1 || aws.ToString(out.Failed[0].Id) != "big" {
		t.Errorf("batch with one entry too long: successful %+v, failed %+v", out.Successful, out.Failed)
	}

	// A batch of 10 x 120,000 bytes (60,000 characters each) is above
	// 1 MiB in bytes, below it in characters.
	_, big := strictQueue(t, q, nil)
	var entries []st.SendMessageBatchRequestEntry
	for i := range 10 {
		entries = append(entries, st.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(strings.Repeat("é", 60000))})
	}
	_, err = q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &big, Entries: entries})
	var tooLong *st.BatchRequestTooLong
	if !errors.As(err, &tooLong) {
		t.Errorf("batch of 1.2 MB: %v, want BatchRequestTooLong", err)
	}
	if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &big, Entries: entries[:8]}); err != nil {
		t.Errorf("batch of 960 KB: %v", err)
	}
}

func TestStrictSQSRedelivery(t *testing.T) {
	_, q, _ := clients(t)
	ctx := t.Context()
	srv := moto.Shared(t).Endpoint
	run := func(share float64) (deleted, again map[string]bool) {
		name, url := strictQueue(t, q, nil)
		if err := moto.SetStrictQueue(ctx, srv, name, map[string]any{moto.KnobSQSRedeliverShare: share}); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m" + strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
		deleted, again = map[string]bool{}, map[string]bool{}
		for len(deleted) < 4 {
			out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, VisibilityTimeout: 1, WaitTimeSeconds: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range out.Messages {
				deleted[aws.ToString(m.MessageId)] = true
				if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The copies come back once the receive's visibility timeout (1 s)
		// is over; wait up to 3 s for them.
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range out.Messages {
				again[aws.ToString(m.MessageId)] = true
			}
		}
		return deleted, again
	}
	deleted, again := run(0.5)
	if len(again) != 2 {
		t.Errorf("share 0.5 of 4 deleted messages: %d came back, want 2", len(again))
	}
	for id := range again {
		if !deleted[id] {
			t.Errorf("message %s came back but was never deleted", id)
		}
	}
	if _, again := run(0); len(again) != 0 {
		t.Errorf("share 0: %d messages came back, want none", len(again))
	}
}

// strictTable creates a table of pk (S) and sk (S) on its own stopped clock.
func strictTable(t *testing.T, db *dynamodb.Client, onDemand bool, knobs map[string]any) string {
	t.Helper()
	name := unique("strict")
	in := &dynamodb.CreateTableInput{
		TableName: &name,
		AttributeDefinitions: []dt.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: dt.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: dt.ScalarAttributeTypeS},
		},
		KeySchema: []dt.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: dt.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: dt.KeyTypeRange},
		},
	}
	if onDemand {
		in.BillingMode = dt.BillingModePayPerRequest
	} else {
		in.ProvisionedThroughput = &dt.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(5), WriteCapacityUnits: aws.Int64(5)}
	}
	if _, err := db.CreateTable(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	srv := moto.Shared(t).Endpoint
	if err := moto.SetClock(t.Context(), srv, moto.TableScope(name), time.Unix(1_800_000_000, 0)); err != nil {
		t.Fatal(err)
	}
	if knobs != nil {
		if err := moto.SetStrictTable(t.Context(), srv, name, knobs); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

func item(pk, sk string, bytes int) map[string]dt.AttributeValue {
	// The names pk, sk and b are 5 bytes; the body makes up the rest.
	return map[string]dt.AttributeValue{"pk": s(pk), "sk": s(sk), "b": s(strings.Repeat("x", bytes-5-len(pk)-len(sk)))}
}

func advance(t *testing.T, table string, d time.Duration) {
	t.Helper()
	if err := moto.AdvanceClock(t.Context(), moto.Shared(t).Endpoint, moto.TableScope(table), d); err != nil {
		t.Fatal(err)
	}
}

func TestStrictDynamoDBPartition(t *testing.T) {
	db, _, _ := clients(t)
	ctx := t.Context()
	put := func(table string, it map[string]dt.AttributeValue) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it}, onceDB)
		return err
	}

	t.Run("1,000 write units a second on one partition key, on demand", func(t *testing.T) {
		table := strictTable(t, db, true, nil)
		// 250 items of 4,000 bytes are 4 write units each: 1,000 units.
		// The last may meet the throttle already when a broken connection
		// (a loaded machine's) made the SDK send one write twice: AWS
		// bills a retried write too.
		var throttled *dt.ThrottlingException
		early := false
		for i := range 250 {
			err := put(table, item("hot", strconv.Itoa(i), 4000))
			if i >= 248 && errors.As(err, &throttled) {
				early = true
				break
			}
			if err != nil {
				t.Fatalf("write %d of 250 (%d units so far): %v", i+1, 4*i, err)
			}
		}
		err := put(table, item("hot", "one-more", 1000))
		if !early && !errors.As(err, &throttled) {
			t.Fatalf("1,001st unit on a partition key of an on-demand table: %v, want ThrottlingException", err)
		}
		if err := put(table, item("cold", "a", 1000)); err != nil {
			t.Errorf("another partition key in the same second: %v", err)
		}
		advance(t, table, time.Second)
		if err := put(table, item("hot", "next-second", 4000)); err != nil {
			t.Errorf("the hot key a second later: %v", err)
		}
	})

	t.Run("provisioned tables throttle with ProvisionedThroughputExceededException", func(t *testing.T) {
		table := strictTable(t, db, false, map[string]any{moto.KnobDynamoPartitionWCU: 10})
		for i := range 10 {
			if err := put(table, item("p", strconv.Itoa(i), 1000)); err != nil {
				t.Fatal(err)
			}
		}
		var exceeded *dt.ProvisionedThroughputExceededException
		if err := put(table, item("p", "x", 10)); !errors.As(err, &exceeded) {
			t.Fatalf("11th unit at 10: %v, want ProvisionedThroughputExceededException", err)
		}
		if len(exceeded.ThrottlingReasons) != 1 || aws.ToString(exceeded.ThrottlingReasons[0].Reason) != "TableWriteKeyRangeThroughputExceeded" {
			t.Errorf("reasons %+v, want TableWriteKeyRangeThroughputExceeded", exceeded.ThrottlingReasons)
		}
	})

	t.Run("a write is billed on the larger item, a failed condition too", func(t *testing.T) {
		table := strictTable(t, db, true, map[string]any{moto.KnobDynamoPartitionWCU: 10})
		if err := put(table, item("k", "big", 5000)); err != nil { // 5 units
			t.Fatal(err)
		}
		// Shrinking it bills the old 5 KB: 10 units now.
		if err := put(table, item("k", "big", 100)); err != nil {
			t.Fatal(err)
		}
		advance(t, table, time.Second)
		for i := range 10 {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item("k", "big", 100),
				ConditionExpression: aws.String("attribute_not_exists(pk)")}, onceDB)
			var failed *dt.ConditionalCheckFailedException
			var early *dt.ThrottlingException
			// The last may be throttled already if a broken connection
			// made the SDK send one of them twice (billed twice, as AWS
			// bills a retried write).
			if !errors.As(err, &failed) && !(i == 9 && errors.As(err, &early)) {
				t.Fatalf("conditional put %d: %v, want ConditionalCheckFailedException", i, err)
			}
		}
		var throttled *dt.ThrottlingException
		if err := put(table, item("k", "other", 100)); !errors.As(err, &throttled) {
			t.Errorf("after 10 failed conditions of one unit each: %v, want ThrottlingException", err)
		}
	})

	t.Run("3,000 read units a second, eventually consistent reads at half", func(t *testing.T) {
		table := strictTable(t, db, true, map[string]any{moto.KnobDynamoPartitionRCU: 10})
		if err := put(table, item("r", "a", 4000)); err != nil {
			t.Fatal(err)
		}
		get := func(consistent bool) error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(consistent),
				Key: map[string]dt.AttributeValue{"pk": s("r"), "sk": s("a")}}, onceDB)
			return err
		}
		for i := range 20 {
			if err := get(false); err != nil {
				t.Fatalf("eventually consistent read %d (half a unit each): %v", i+1, err)
			}
		}
		var throttled *dt.ThrottlingException
		if err := get(false); !errors.As(err, &throttled) {
			t.Fatalf("21st half unit at 10: %v, want ThrottlingException", err)
		}
		advance(t, table, time.Second)
		for i := range 10 {
			if err := get(true); err != nil {
				t.Fatalf("consistent read %d: %v", i+1, err)
			}
		}
		if err := get(true); !errors.As(err, &throttled) {
			t.Fatalf("11th unit at 10: %v, want ThrottlingException", err)
		}
		_, err := db.Query(ctx, &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]dt.AttributeValue{":p": s("r")}}, onceDB)
		if !errors.As(err, &throttled) {
			t.Errorf("a query of the hot key: %v, want ThrottlingException", err)
		}
	})

	t.Run("the default limit is 1,000 and counted per second", func(t *testing.T) {
		table := strictTable(t, db, true, nil)
		// 990 units, then a second later 990 more: never 1,000 in a second.
		for sec := range 2 {
			for i := range 99 {
				if err := put(table, item("steady", strconv.Itoa(sec*1000+i), 10*1024)); err != nil {
					t.Fatalf("second %d write %d: %v", sec, i, err)
				}
			}
			advance(t, table, time.Second)
		}
	})
}

func TestStrictDynamoDBWarmThroughput(t *testing.T) {
	db, _, _ := clients(t)
	ctx := t.Context()
	for _, onDemand := range []bool{true, false} {
		table := strictTable(t, db, onDemand, map[string]any{moto.KnobDynamoOnDemandWCU: 20})
		var err error
		for i := range 21 {
			// Every item its own partition key: only the table's limit applies.
			if _, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item("k"+strconv.Itoa(i), "s", 1000)}, onceDB); err != nil {
				break
			}
		}
		var throttled *dt.ThrottlingException
		if onDemand && !errors.As(err, &throttled) {
			t.Errorf("on demand, 21 units at a warm throughput of 20: %v, want ThrottlingException", err)
		}
		if !onDemand && err != nil {
			t.Errorf("provisioned, 21 units on 21 keys: %v (the on-demand warm throughput does not apply)", err)
		}
	}
}

func TestStrictDynamoDBStaleReads(t *testing.T) {
	db, _, _ := clients(t)
	ctx := t.Context()
	table := strictTable(t, db, true, nil)
	key := map[string]dt.AttributeValue{"pk": s("v"), "sk": s("x")}
	put := func(v string) {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]dt.AttributeValue{"pk": s("v"), "sk": s("x"), "v": s(v)}}); err != nil {
			t.Fatal(err)
		}
	}
	versions := func(consistent bool) map[string]int {
		seen := map[string]int{}
		for range 64 {
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(consistent)})
			if err != nil {
				t.Fatal(err)
			}
			v := "absent"
			if out.Item != nil {
				v = out.Item["v"].(*dt.AttributeValueMemberS).Value
			}
			seen[v]++
		}
		return seen
	}
	put("one")
	advance(t, table, 500*time.Millisecond)
	if seen := versions(false); seen["absent"] == 0 || seen["one"] == 0 {
		t.Errorf("eventually consistent reads half a second after the first write: %v, want both the item and no item", seen)
	}
	advance(t, table, 2*time.Second)
	put("two")
	advance(t, table, 500*time.Millisecond)
	if seen := versions(false); seen["one"] == 0 || seen["two"] == 0 || len(seen) != 2 {
		t.Errorf("eventually consistent reads half a second after an update: %v, want one and two", seen)
	}
	if seen := versions(true); seen["two"] != 64 {
		t.Errorf("consistent reads: %v, want two only", seen)
	}
	out, err := db.Query(ctx, &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]dt.AttributeValue{":p": s("v")}, ConsistentRead: aws.Bool(true)})
	if err != nil || len(out.Items) != 1 || out.Items[0]["v"].(*dt.AttributeValueMemberS).Value != "two" {
		t.Errorf("consistent query: %v %+v", err, out)
	}
	advance(t, table, time.Second)
	if seen := versions(false); seen["two"] != 64 {
		t.Errorf("eventually consistent reads a second after the write: %v, want two only", seen)
	}
}

func TestStrictTTL(t *testing.T) {
	srv := moto.Shared(t).Endpoint
	cfg, err := moto.AWSConfig(t.Context(), srv)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	cfg.APIOptions = append(cfg.APIOptions, moto.WithClock(func() time.Time { return now }))
	db := dynamodb.NewFromConfig(cfg)
	ctx := t.Context()
	table := strictTable(t, db, true, map[string]any{moto.KnobDynamoTTLMaxDelayS: 3600})
	if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &table,
		TimeToLiveSpecification: &dt.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	put := func(sk string, ttl int64) {
		it := map[string]dt.AttributeValue{"pk": s("t"), "sk": s(sk)}
		if ttl != 0 {
			it["ttl"] = n(ttl)
		}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	count := func() (left map[string]bool) {
		left = map[string]bool{}
		out, err := db.Query(ctx, &dynamodb.QueryInput{TableName: &table, ConsistentRead: aws.Bool(true),
			KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: map[string]dt.AttributeValue{":p": s("t")}})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			left[it["sk"].(*dt.AttributeValueMemberS).Value] = true
		}
		return left
	}
	expiry := now.Unix() + 60
	for i := range 40 {
		put("e"+strconv.Itoa(i), expiry)
	}
	put("forever", 0)
	put("later", expiry+10*3600)

	now = time.Unix(expiry-1, 0)
	if left := count(); len(left) != 42 {
		t.Errorf("before the expiry: %d items, want 42", len(left))
	}
	// Half the delay past the expiry, about half the expired items are gone
	// (each at its own random point; all or none has odds of 2^-39).
	now = time.Unix(expiry+1800, 0)
	left := count()
	if len(left) <= 2 || len(left) >= 42 {
		t.Errorf("half the delay after the expiry: %d items left, want some of the 40 gone and some not", len(left))
	}
	now = time.Unix(expiry+3600, 0)
	left = count()
	if len(left) != 2 || !left["forever"] || !left["later"] {
		t.Errorf("past the longest delay: %v, want forever and later only", left)
	}
	// A TTL moved later by a rewrite is judged on its new value.
	put("moved", now.Unix()-10)
	put("moved", now.Unix()+100*3600)
	now = now.Add(2 * time.Hour)
	if left := count(); !left["moved"] {
		t.Errorf("an item whose TTL was moved later was deleted at its old TTL: %v", left)
	}
}

func TestStrictSSM(t *testing.T) {
	// The bucket is the account's: a server of its own, so the other tests'
	// reads neither take from it nor are refused by it.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv, err := moto.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg, err := moto.AWSConfig(ctx, srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := ssm.NewFromConfig(cfg)
	for i := range 12 {
		if _, err := c.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/strict/p" + strconv.Itoa(i)), Value: aws.String("v"), Type: ssmt.ParameterTypeString}); err != nil {
			t.Fatal(err)
		}
	}
	if err := moto.SetClock(ctx, srv.Endpoint, moto.ScopeSSM, time.Unix(1_800_000_000, 0)); err != nil {
		t.Fatal(err)
	}
	get := func(i int) error {
		var err error
		switch i % 3 {
		case 0:
			_, err = c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/strict/p1")}, onceSSM)
		case 1:
			_, err = c.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{"/strict/p1", "/strict/p2"}}, onceSSM)
		default:
			_, err = c.GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: aws.String("/strict")}, onceSSM)
		}
		return err
	}
	throttled := func(err error) bool {
		var api smithy.APIError
		return errors.As(err, &api) && api.ErrorCode() == "ThrottlingException"
	}
	// counted sums one of the layer's SSM counters over the operations.
	counted := func(name string) float64 {
		t.Helper()
		status, err := moto.Strict(ctx, srv.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		for _, v := range status.Counters[name] {
			n += v
		}
		return n
	}
	// burst calls until one is throttled and returns how many calls the
	// bucket let through meanwhile, as the server counted them: a call
	// whose reply a loaded machine lost is sent again (connRetryer) and
	// may take a second token, so the client's count is not the bucket's.
	seen := 0 // throttles the client saw
	burst := func(what string, kind func(int) int, most int) float64 {
		t.Helper()
		before := counted("ssm_accepted")
		for i := range most {
			err := get(kind(i))
			if throttled(err) {
				seen++
				return counted("ssm_accepted") - before
			}
			if err != nil {
				t.Fatalf("%s, call %d: %v", what, i+1, err)
			}
		}
		t.Fatalf("%s: %d calls and none throttled", what, most)
		return 0
	}
	mixed := func(i int) int { return i }
	if n := burst("a second's calls", mixed, 60); n != 40 {
		t.Errorf("%v calls let through in a second, want 40", n)
	}
	for i := range 3 {
		if err := get(i); !throttled(err) {
			t.Errorf("a call past 40 in a second (%d): %v, want ThrottlingException", i, err)
		} else {
			seen++
		}
	}
	if err := moto.AdvanceClock(ctx, srv.Endpoint, moto.ScopeSSM, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := burst("half a second later", mixed, 40); n != 20 {
		t.Errorf("%v calls let through half a second later, want 20", n)
	}

	// Higher throughput: GetParameter(s) in the thousands, by path 100.
	if err := moto.SetStrict(ctx, srv.Endpoint, map[string]any{moto.KnobSSMHigherThroughput: true}); err != nil {
		t.Fatal(err)
	}
	if n := burst("GetParametersByPath with higher throughput", func(int) int { return 2 }, 150); n != 100 {
		t.Errorf("%v GetParametersByPath let through with higher throughput, want 100", n)
	}
	for i := range 200 {
		if err := get(i % 2); err != nil {
			t.Fatalf("GetParameter(s) %d of 200 with higher throughput: %v", i+1, err)
		}
	}
	// A throttle whose reply was lost is counted again when resent.
	if n := counted("ssm_throttles"); n < float64(seen) {
		t.Errorf("the layer counted %v throttles, want at least the %d the client saw", n, seen)
	}
}
