package dynamo

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// robotsPrefix keys a robots item: pk "h#<key>", sk "r#<origin>". It is an
// item of its own, not a host attribute, so the host item that every ingest
// and check rewrites stays small; it is written once per RobotsTTL.
const robotsPrefix = "r#"

// maxRobotsStored keeps the gzipped body well inside the 400 KB item limit.
const maxRobotsStored = 300 << 10

type robotsItem struct {
	PK     string `dynamodbav:"pk"`
	SK     string `dynamodbav:"sk"`
	Status int    `dynamodbav:"s"`
	Body   []byte `dynamodbav:"b,omitempty"` // gzip
	At     int64  `dynamodbav:"t"`
	TTL    int64  `dynamodbav:"ttl"`
}

// robotsKeep is how long a stored robots.txt outlives its fetch, after
// which TTL removes it (it is refetched long before, after RobotsTTL).
const robotsKeep = 7 * 24 * time.Hour

// Robots implements hostqueue.RobotsCache.
func (s *Store) Robots(ctx context.Context, key, origin string) (*hostqueue.Robots, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: itemKey(hostPK(key), robotsPrefix+origin), ConsistentRead: aws.Bool(false),
	})
	if err != nil {
		return nil, fmt.Errorf("read robots.txt of %s: %w", origin, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	var it robotsItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return nil, fmt.Errorf("decode robots.txt of %s: %w", origin, err)
	}
	r := &hostqueue.Robots{Status: it.Status, FetchedAt: time.UnixMilli(it.At)}
	if r.Body, err = gunzip(it.Body); err != nil {
		return nil, fmt.Errorf("decode robots.txt of %s: %w", origin, err)
	}
	return r, nil
}

// commitRobots returns a commit's robots.txt answers in the host item's
// form. Small ones ride in the host item, applied at every attempt; large
// ones get an item of their own, written once here rather than again on
// every lost race, and only a mark (StoredApart) in the host item.
func (s *Store) commitRobots(ctx context.Context, key string, answers map[string]hostqueue.Robots) (map[string]inlineRobots, error) {
	out := make(map[string]inlineRobots, len(answers))
	for origin, r := range answers {
		if ir, ok := inline(r); ok {
			out[origin] = ir
			continue
		}
		if err := s.PutRobots(ctx, key, origin, r); err != nil {
			return nil, err
		}
		out[origin] = inlineRobots{StoredApart: true, FetchedAt: r.FetchedAt.UnixMilli()}
	}
	return out, nil
}

// mergeRobots keeps a commit's answers in the host item, replacing their
// origins' earlier ones, within the bounds of pruneRobots.
func (h *hostItem) mergeRobots(answers map[string]inlineRobots) {
	if len(answers) == 0 {
		return
	}
	h.Robots = maps.Clone(h.Robots)
	if h.Robots == nil {
		h.Robots = map[string]inlineRobots{}
	}
	maps.Copy(h.Robots, answers)
	pruneRobots(h.Robots)
}

// maxInlineRobots is the largest gzipped robots.txt kept in the host item:
// small enough that the host item stays within one write unit.
const maxInlineRobots = 200

// inline returns r in the host item's form when it is small enough.
func inline(r hostqueue.Robots) (inlineRobots, bool) {
	z := gzipped(r.Body)
	if len(z) > maxInlineRobots {
		return inlineRobots{}, false
	}
	return inlineRobots{Status: r.Status, GzipBody: z, FetchedAt: r.FetchedAt.UnixMilli()}, true
}

func (ir inlineRobots) robots() (hostqueue.Robots, error) {
	r := hostqueue.Robots{Status: ir.Status, FetchedAt: time.UnixMilli(ir.FetchedAt)}
	var err error
	r.Body, err = gunzip(ir.GzipBody)
	return r, err
}

func gzipped(body []byte) []byte {
	if len(body) == 0 {
		return nil
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(body)
	_ = zw.Close()
	return buf.Bytes()
}

func gunzip(z []byte) ([]byte, error) {
	if len(z) == 0 {
		return nil, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// PutRobots implements hostqueue.RobotsCache.
func (s *Store) PutRobots(ctx context.Context, key, origin string, r hostqueue.Robots) error {
	body := r.Body
	z := gzipped(body)
	for len(z) > maxRobotsStored {
		// An incompressible giant: keep its first half, cut at a line.
		body = body[:bytes.LastIndexByte(body[:len(body)/2], '\n')+1]
		z = gzipped(body)
	}
	item, err := attributevalue.MarshalMap(robotsItem{
		PK: hostPK(key), SK: robotsPrefix + origin, Status: r.Status, Body: z,
		At: r.FetchedAt.UnixMilli(), TTL: r.FetchedAt.Add(robotsKeep).Unix(),
	})
	if err != nil {
		return fmt.Errorf("encode robots.txt of %s: %w", origin, err)
	}
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item}); err != nil {
		return fmt.Errorf("store robots.txt of %s: %w", origin, err)
	}
	return nil
}

// A host item holds the small robots.txt answers of at most
// maxInlineOrigins origins, their gzipped bodies at most
// maxInlineRobotsBytes in all. One origin per host is the rule, but a key
// in domain queue mode gathers every subdomain's, and nothing else would
// stop that map from outgrowing the item (400 KB) and every write of it
// from costing more.
const (
	maxInlineOrigins     = 32
	maxInlineRobotsBytes = 2 << 10
)

// pruneRobots keeps the most recently fetched answers within the bounds
// above and drops the rest. A dropped origin's robots.txt is fetched again
// when its next URL comes up. When it was a mark (StoredApart) for a
// robots item of its own, that item is left in place: nothing looks it up
// any more, its TTL removes it (robotsKeep after its fetch), and a
// refetch overwrites it.
func pruneRobots(rb map[string]inlineRobots) {
	total := 0
	for _, ir := range rb {
		total += len(ir.GzipBody)
	}
	if len(rb) <= maxInlineOrigins && total <= maxInlineRobotsBytes {
		return
	}
	newestFirst := slices.SortedFunc(maps.Keys(rb), func(a, b string) int {
		if c := cmp.Compare(rb[b].FetchedAt, rb[a].FetchedAt); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	kept, size := 0, 0
	for _, origin := range newestFirst {
		if kept < maxInlineOrigins && size+len(rb[origin].GzipBody) <= maxInlineRobotsBytes {
			kept++
			size += len(rb[origin].GzipBody)
			continue
		}
		// Once one does not fit, every older one goes too: what is kept
		// is always the newest answers.
		kept = maxInlineOrigins
		delete(rb, origin)
	}
}
