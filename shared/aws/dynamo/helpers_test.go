package dynamo_test

// Integration tests of the DynamoDB store against a real moto server, on a
// table created from template.yaml by internal/stack (one table per test, so
// tests run in parallel on the shared server). They read the raw items too,
// through the layout documented in layout.go: host item pk "h#<key>" sk "h",
// chunk items sk "c#<id>".

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// t0 is the tests' fixed clock: whole milliseconds, as the store keeps them.
var t0 = time.UnixMilli(1_760_000_000_000)

// env is one test's table on the shared moto server.
type env struct {
	t     *testing.T
	db    *dynamodb.Client
	table string
	store *dynamo.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	// The strict layer's TTL reaper judges expiry on the tests' clock (t0,
	// a year before the machine's): on the server's clock every TTL the
	// stores write would be long past, and their items deleted at once.
	cfg.APIOptions = append(cfg.APIOptions, moto.WithClock(fixedNow))
	db := dynamodb.NewFromConfig(cfg)
	return &env{t: t, db: db, table: st.TableName, store: newStore(db, st.TableName)}
}

func fixedNow() time.Time { return t0 }

// on returns e reporting to t, for a subtest on its parent's table.
func (e *env) on(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// fresh returns another store on the same table with an empty chunk cache:
// what a different Lambda instance sees, and proof that state is in the
// table rather than in the writer's memory.
func (e *env) fresh() *dynamo.Store { return newStore(e.db, e.table) }

// wrapped returns a store whose client is c (a wrapper around e.db).
func (e *env) wrapped(c dynamo.Client) *dynamo.Store { return newStore(c, e.table) }

// newStore is a store whose outcome reads wait as long as a loaded
// machine's moto may take (one GetItem queued behind a thousand others),
// so no test depends on the machine's speed.
func newStore(c dynamo.Client, table string) *dynamo.Store {
	s := dynamo.New(c, table, fixedNow)
	s.SettleTimeout = time.Minute
	return s
}

// entry makes an entry whose stored-size estimate (8 + len(ID) + len(URL),
// see layout.go) is exactly size bytes, so tests control when the 700-byte
// inline tail spills into a chunk.
func entry(id string, size int) hostqueue.Entry {
	base := "https://h.example/" + id + "/"
	pad := size - 8 - len(id) - len(base)
	if pad < 0 {
		panic(fmt.Sprintf("entry %s cannot be %d bytes", id, size))
	}
	return hostqueue.Entry{ID: id, URL: base + strings.Repeat("p", pad)}
}

// entries makes n entries tag-from .. tag-(from+n-1) of size bytes each.
func entries(tag string, from, n, size int) []hostqueue.Entry {
	out := make([]hostqueue.Entry, n)
	for i := range out {
		out[i] = entry(fmt.Sprintf("%s-%05d", tag, from+i), size)
	}
	return out
}

func ids(es []hostqueue.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func (e *env) append(key string, es []hostqueue.Entry, limit int) hostqueue.AppendResult {
	e.t.Helper()
	res, err := e.store.Append(e.t.Context(), hostqueue.AppendRequest{Key: key, Entries: es, Limit: limit, Due: t0})
	if err != nil {
		e.t.Fatalf("append %d to %s: %v", len(es), key, err)
	}
	return res
}

// load reads a host through a fresh store (no cache).
func (e *env) load(key string, want int) *hostqueue.Host {
	e.t.Helper()
	h, err := e.fresh().Load(e.t.Context(), key, want)
	if err != nil {
		e.t.Fatalf("load %s: %v", key, err)
	}
	return h
}

func (e *env) wantHead(key string, want []string) {
	e.t.Helper()
	h := e.load(key, len(want)+100)
	if h.Pending != len(want) {
		e.t.Errorf("%s: Pending = %d, want %d", key, h.Pending, len(want))
	}
	if got := ids(h.Head); !slices.Equal(got, want) {
		e.t.Errorf("%s: queue =\n  %v\nwant\n  %v", key, got, want)
	}
}

// rawHost is the host item as stored.
type rawHost struct {
	// Listed is the due-index item naming the host, Due its due time.
	Listed string     `dynamodbav:"ix"`
	Due    int64      `dynamodbav:"dd"`
	TTL    int64      `dynamodbav:"ttl"`
	V      int64      `dynamodbav:"v"`
	VS     int        `dynamodbav:"vs"`
	Q      []rawEntry `dynamodbav:"q"`
	C      []struct {
		ID string `dynamodbav:"i"`
		N  int    `dynamodbav:"n"`
	} `dynamodbav:"c"`
	CO    int `dynamodbav:"co"`
	attrs map[string]types.AttributeValue
}

// rawEntry is a queued entry as stored (entryItem in layout.go).
type rawEntry struct {
	ID            string `dynamodbav:"i"`
	URL           string `dynamodbav:"u"`
	ETag          string `dynamodbav:"e,omitempty"`
	LastModified  string `dynamodbav:"m,omitempty"`
	ValidatorsURL string `dynamodbav:"v,omitempty"`
	Hops          int    `dynamodbav:"h,omitempty"`
}

func rawEntries(es []hostqueue.Entry) []rawEntry {
	out := make([]rawEntry, len(es))
	for i, e := range es {
		out[i] = rawEntry(e)
	}
	return out
}

func rawIDs(rs []rawEntry) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func (e *env) rawHost(key string) *rawHost {
	e.t.Helper()
	out, err := e.db.GetItem(e.t.Context(), &dynamodb.GetItemInput{
		TableName:      &e.table,
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "h#" + key}, "sk": &types.AttributeValueMemberS{Value: "h"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		e.t.Fatalf("get host item %s: %v", key, err)
	}
	if len(out.Item) == 0 {
		return nil
	}
	var h rawHost
	if err := attributevalue.UnmarshalMap(out.Item, &h); err != nil {
		e.t.Fatalf("decode host item %s: %v", key, err)
	}
	h.attrs = out.Item
	return &h
}

// chunkSKs lists the chunk items under a host's partition key, by a Query
// on pk: what is really in the table, whatever the host item says.
func (e *env) chunkSKs(key string) []string {
	e.t.Helper()
	var sks []string
	p := dynamodb.NewQueryPaginator(e.db, &dynamodb.QueryInput{
		TableName:              &e.table,
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :c)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: "h#" + key},
			":c":  &types.AttributeValueMemberS{Value: "c#"},
		},
		ProjectionExpression: aws.String("sk"),
		ConsistentRead:       aws.Bool(true),
	})
	for p.HasMorePages() {
		out, err := p.NextPage(e.t.Context())
		if err != nil {
			e.t.Fatalf("query chunks of %s: %v", key, err)
		}
		for _, it := range out.Items {
			sks = append(sks, it["sk"].(*types.AttributeValueMemberS).Value)
		}
	}
	slices.Sort(sks)
	return sks
}

// checkChunks asserts that the chunk items in the table are exactly those
// the host item references: none leaked by a lost race, none missing.
func (e *env) checkChunks(key string) {
	e.t.Helper()
	var refs []string
	if h := e.rawHost(key); h != nil {
		for _, c := range h.C {
			refs = append(refs, "c#"+c.ID)
		}
	}
	slices.Sort(refs)
	if got := e.chunkSKs(key); !slices.Equal(got, refs) {
		e.t.Errorf("%s: chunk items in the table %v, host item references %v", key, got, refs)
	}
}

// countingClient passes every call to the real client and counts host-item
// writes refused by their condition, i.e. the conflicts the store retried.
// An optional hook runs before each host-item PutItem, which lets a test
// slip a concurrent writer in between a store's read and its write.
type countingClient struct {
	dynamo.Client
	conflicts atomic.Int64
	puts      atomic.Int64
	// versions, when set, records every host version written successfully:
	// two successful writes of one version mean the table let a
	// conditional write through on a stale version (a lost update).
	versions      *sync.Map
	dupVersions   atomic.Int64
	beforeHostPut func(ctx context.Context, n int64)
}

func (c *countingClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	isHost := false
	if sk, ok := in.Item["sk"].(*types.AttributeValueMemberS); ok && sk.Value == "h" {
		isHost = true
		n := c.puts.Add(1)
		if c.beforeHostPut != nil {
			c.beforeHostPut(ctx, n)
		}
	}
	out, err := c.Client.PutItem(ctx, in, opt...)
	if isHost && err == nil && c.versions != nil {
		v := in.Item["pk"].(*types.AttributeValueMemberS).Value + " v" + in.Item["v"].(*types.AttributeValueMemberN).Value
		if _, dup := c.versions.LoadOrStore(v, true); dup {
			c.dupVersions.Add(1)
		}
	}
	var cf *types.ConditionalCheckFailedException
	if isHost && err != nil && errors.As(err, &cf) {
		c.conflicts.Add(1)
	}
	return out, err
}

// atomicConditions makes conditional writes to moto atomic, as they are on
// DynamoDB, by letting one at a time through. moto 5.2.5 reads the current
// item, evaluates the condition and stores the new item in separate steps
// with no lock, so under concurrent requests two writes conditioned on the
// same version can both succeed and one is silently lost (seen here on
// host items, whose list-of-map attributes make the unlocked window wide).
// The store relies on DynamoDB's guarantee; tests that race writers on one
// item wrap their client in this to test the store rather than moto. Reads
// and unconditional writes are not held, so conflicts still happen. Chunk
// writes are not held either: conditioned on attribute_not_exists under
// random ids, they race nothing, and holding them behind every host write
// would stretch each append's read-to-write window far beyond DynamoDB's.
type atomicConditions struct {
	dynamo.Client
	mu *sync.Mutex
}

func (c atomicConditions) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if in.ConditionExpression != nil && !strings.HasPrefix(skOf(in.Item), "c#") {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	return c.Client.PutItem(ctx, in, opt...)
}

func (c atomicConditions) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if in.ConditionExpression != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	return c.Client.UpdateItem(ctx, in, opt...)
}

func (c atomicConditions) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if in.ConditionExpression != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	return c.Client.DeleteItem(ctx, in, opt...)
}

// TransactWriteItems is held too: a transaction's host write is
// conditioned on its version as a PutItem's is.
func (c atomicConditions) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opt ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Client.TransactWriteItems(ctx, in, opt...)
}

// readYourWrites turns the strict layer's stale reads off for e's table:
// for tests that read back what they just wrote through an eventually
// consistent read (the robots cache's GetItem, the due index's Query, the
// host item's GetItem in DueHosts). On AWS such a read may miss a write
// for up to a second; these tests assert the store's logic, not that.
func (e *env) readYourWrites() {
	e.t.Helper()
	if err := moto.SetStrictTable(e.t.Context(), moto.Shared(e.t).Endpoint, e.table, map[string]any{moto.KnobDynamoStaleReadMs: 0}); err != nil {
		e.t.Fatal(err)
	}
}
