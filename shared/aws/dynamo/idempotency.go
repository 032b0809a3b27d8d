package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

var _ hostqueue.IdempotencyStore = (*Store)(nil)

// Idempotency records live in the hosts' table as a fourth kind of item:
//
//	idempotency pk "i#<key>", sk "i"  one POST /urls idempotency key:
//	                                  body hash, state, holder, window,
//	                                  the answer's status and ids
//
// They are not due-index items (not under "d#"), and expire
// by the table's TTL attribute at the window's end. DynamoDB deletes
// expired items late (up to days), so a record whose window has ended is
// treated as absent by Decide and replaced under a condition that says so.
const (
	idemPrefix = "i#"
	idemSK     = "i"
	// idemAttempts bounds Claim's read-decide-write rounds; more than a
	// couple means writers keep racing on one key, which a client retrying
	// one request does not do.
	idemAttempts = 8
)

type idemItem struct {
	PK        string `dynamodbav:"pk"`
	SK        string `dynamodbav:"sk"`
	BodyHash  string `dynamodbav:"bh"`
	State     string `dynamodbav:"st"`
	Token     string `dynamodbav:"tk"`
	LockUntil int64  `dynamodbav:"lk,omitempty"` // ms
	Expires   int64  `dynamodbav:"ex"`           // the window's end, ms
	TTL       int64  `dynamodbav:"ttl"`          // the window's end, s (the table's TTL)
	Status    int    `dynamodbav:"sc,omitempty"`
	// AcceptedIDs joins the accepted ids with commas: one string costs
	// less to store and write than a list (1000 ids, 25 KB).
	AcceptedIDs string `dynamodbav:"ids,omitempty"`
	Denied      int    `dynamodbav:"dn,omitempty"`
}

func toIdemItem(key string, r hostqueue.IdempotencyRecord) idemItem {
	it := idemItem{PK: idemPrefix + key, SK: idemSK, BodyHash: r.BodyHash, State: string(r.State), Token: r.Token,
		Expires: r.Expires.UnixMilli(), TTL: r.Expires.Unix(), Status: r.Status, AcceptedIDs: strings.Join(r.Accepted, ","), Denied: r.Denied}
	if !r.LockUntil.IsZero() {
		it.LockUntil = r.LockUntil.UnixMilli()
	}
	return it
}

func (it idemItem) record() hostqueue.IdempotencyRecord {
	r := hostqueue.IdempotencyRecord{BodyHash: it.BodyHash, State: hostqueue.IdempotencyState(it.State), Token: it.Token,
		Expires: time.UnixMilli(it.Expires), Status: it.Status, Denied: it.Denied}
	if it.LockUntil != 0 {
		r.LockUntil = time.UnixMilli(it.LockUntil)
	}
	if it.AcceptedIDs != "" {
		r.Accepted = strings.Split(it.AcceptedIDs, ",")
	}
	return r
}

// Claim implements hostqueue.IdempotencyStore. The first attempt writes a
// fresh record without reading (the common case: a new key). Any other
// answer, a lost one included, is judged on a strongly consistent read:
// a record holding the claim's own token is the claim's own write that
// landed.
func (s *Store) Claim(ctx context.Context, c hostqueue.IdempotencyClaim) (hostqueue.IdempotencyRecord, error) {
	if err := checkIdemKey(c.Key); err != nil {
		return hostqueue.IdempotencyRecord{}, err
	}
	var cur *hostqueue.IdempotencyRecord
	for attempt := 0; attempt < idemAttempts; attempt++ {
		next, write, err := c.Decide(cur)
		if err != nil || !write {
			return next, err
		}
		var cond *string
		vals := map[string]types.AttributeValue{}
		if cur == nil || !cur.Expires.After(c.Now) {
			cond = aws.String("attribute_not_exists(pk) OR ex <= :now")
			vals[":now"] = &types.AttributeValueMemberN{Value: fmt.Sprint(c.Now.UnixMilli())}
		} else {
			cond = aws.String("tk = :tk AND st = :st")
			vals[":tk"] = &types.AttributeValueMemberS{Value: cur.Token}
			vals[":st"] = &types.AttributeValueMemberS{Value: string(cur.State)}
		}
		werr := s.putIdem(ctx, toIdemItem(c.Key, next), cond, vals)
		if werr == nil {
			return next, nil
		}
		if ctx.Err() != nil {
			return hostqueue.IdempotencyRecord{}, fmt.Errorf("claim idempotency key: %w", werr)
		}
		got, rerr := s.getIdem(ctx, c.Key)
		if rerr != nil {
			return hostqueue.IdempotencyRecord{}, fmt.Errorf("claim idempotency key: %w (then %w)", werr, rerr)
		}
		cur = got
	}
	return hostqueue.IdempotencyRecord{}, fmt.Errorf("claim idempotency key: %w", hostqueue.ErrConflict)
}

// Settle implements hostqueue.IdempotencyStore: the record is written
// whole, under the condition that the token still holds it. Sending it
// again (the SDK's retry of a lost answer) meets the same condition and
// writes the same item.
func (s *Store) Settle(ctx context.Context, key, token string, outcome hostqueue.IdempotencyRecord) error {
	if err := checkIdemKey(key); err != nil {
		return err
	}
	if outcome.BodyHash == "" || outcome.Expires.IsZero() {
		return errors.New("settle idempotency key: the outcome must be the claimed record (body hash and window end set)")
	}
	outcome.Token, outcome.LockUntil = token, time.Time{}
	err := s.putIdem(ctx, toIdemItem(key, outcome), aws.String("tk = :tk"),
		map[string]types.AttributeValue{":tk": &types.AttributeValueMemberS{Value: token}})
	if isConditionFailed(err) {
		return fmt.Errorf("settle idempotency key: %w", hostqueue.ErrIdempotencyLost)
	}
	if err != nil {
		return fmt.Errorf("settle idempotency key: %w", err)
	}
	return nil
}

// checkIdemKey keeps keys to what the caller promises: a short hash.
func checkIdemKey(key string) error {
	if key == "" || len(key) > 128 {
		return fmt.Errorf("idempotency key of %d bytes: want 1 to 128", len(key))
	}
	return nil
}

func (s *Store) putIdem(ctx context.Context, it idemItem, cond *string, vals map[string]types.AttributeValue) error {
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return fmt.Errorf("encode idempotency record: %w", err)
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: item, ConditionExpression: cond, ExpressionAttributeValues: vals,
	})
	return err
}

func (s *Store) getIdem(ctx context.Context, key string) (*hostqueue.IdempotencyRecord, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: itemKey(idemPrefix+key, idemSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("read idempotency record: %w", err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	var it idemItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return nil, fmt.Errorf("decode idempotency record: %w", err)
	}
	r := it.record()
	return &r, nil
}
