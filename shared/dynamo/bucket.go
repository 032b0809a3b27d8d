package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/hostqueue"
)

// Due buckets: the due-index items of the hosts no due list names (see
// duelist.go for what every index item guarantees). A bucket holds the
// entries due in one slot of bucketSpan, at most bucketCap of them: an add
// is an update, billed on the whole item, so a bucket of 30 host keys keeps
// an add at one write unit. An add is conditional: not closed, not full;
// it is made by the host write's own attempt, before the host write, with
// the version that write is conditioned on.
//
// The check closes a bucket once its slot is over by closeMargin (a
// conditional write: no add can land after it, and its answer is the
// bucket's final content, so nothing is read again), dispatches what it
// names and deletes it once every host it names has settled. An add that
// finds its bucket closed (a writer whose clock is behind) goes to the
// next slot, one that finds it full to the next bucket of the slot.

const (
	// bucketSpan is a bucket's slot: the default CheckHostPeriod, within
	// which due times are staggered anyway.
	bucketSpan = 5 * time.Second
	// bucketCap bounds a bucket's adds: ~30 bytes a host, one write unit.
	bucketCap = 30
	// closeMargin is how long after its slot a bucket is closed: longer
	// than a writer takes from reading its clock to its add.
	closeMargin = bucketSpan
	// maxBucketTries bounds the buckets one add tries.
	maxBucketTries = 20
)

// bucketSK is a bucket's sort key: its slot's start first (see listSK).
func bucketSK(slot int64, seq int) string {
	return fmt.Sprintf("%013d%s%d", slot, bucketMark, seq)
}

// bucketPos is the bucket a shard's adds go to next, as far as the store
// knows: a slot and its sequence number.
type bucketPos struct {
	slot int64
	seq  int
}

// addToBucket adds key, at version (the version its host write is
// conditioned on), due at due (ms), to a bucket of its shard: the slot of
// due, or of now when that is later. It returns the bucket's sort key.
// Under a lost answer the add may land twice (a duplicate entry, which
// reads as one) or land while an error comes back (a stale entry, settled
// by the host's version): neither loses a host.
func (s *Store) addToBucket(ctx context.Context, key string, version, due int64) (string, error) {
	vs := hostqueue.VirtualShard(key)
	span := bucketSpan.Milliseconds()
	slot := max(due, s.now().UnixMilli())
	slot -= slot % span
	seq := 0
	s.mu.Lock()
	if p, ok := s.buckets[vs]; ok && p.slot == slot {
		seq = p.seq
	}
	s.mu.Unlock()
	for try := 1; ; try++ {
		sk := bucketSK(slot, seq)
		_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:        &s.table,
			Key:              itemKey(duePK(vs), sk),
			UpdateExpression: aws.String("SET h = list_append(if_not_exists(h, :none), :h), hv = list_append(if_not_exists(hv, :none), :v), hd = list_append(if_not_exists(hd, :none), :d) ADD c :one"),
			// Not closed, not full.
			ConditionExpression: aws.String("attribute_not_exists(x) AND (attribute_not_exists(c) OR c < :cap)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":none": &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
				":h":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: key}}},
				":v":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: strconv.FormatInt(version, 10)}}},
				":d":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: strconv.FormatInt(due, 10)}}},
				":one":  &types.AttributeValueMemberN{Value: "1"},
				":cap":  &types.AttributeValueMemberN{Value: strconv.Itoa(bucketCap)},
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			s.mu.Lock()
			s.buckets[vs] = bucketPos{slot, seq}
			s.mu.Unlock()
			return sk, nil
		}
		var cf *types.ConditionalCheckFailedException
		if !errors.As(err, &cf) {
			return "", fmt.Errorf("add %s to due bucket %s of shard %d: %w", key, sk, vs, err)
		}
		if try >= maxBucketTries {
			return "", fmt.Errorf("add %s to a due bucket of shard %d: %d buckets full or closed: %w", key, vs, try, err)
		}
		if _, closed := cf.Item["x"]; closed {
			slot, seq = slot+span, 0
		} else {
			seq++
		}
	}
}

// closable tells whether it is a bucket to close now: open, its slot over
// by closeMargin on the store's clock.
func (s *Store) closable(it *indexItem) bool {
	return it.bucket() && !it.Closed &&
		s.now().UnixMilli() >= itemTime(it.SK)+(bucketSpan+closeMargin).Milliseconds()
}

// closeBucket closes it so that no add lands in it any more, and takes
// the answer, the bucket as closed, as its content. On an error it is left
// as read (open, closed again at the next look).
func (s *Store) closeBucket(ctx context.Context, it *indexItem) {
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       itemKey(it.PK, it.SK),
		UpdateExpression:          aws.String("SET x = :x"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":x": &types.AttributeValueMemberBOOL{Value: true}},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return
	}
	var closed indexItem
	if attributevalue.UnmarshalMap(out.Attributes, &closed) == nil && len(closed.Versions) == len(closed.Hosts) && len(closed.Dues) == len(closed.Hosts) {
		*it = closed
	}
}
