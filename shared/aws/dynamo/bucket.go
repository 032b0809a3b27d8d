package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// Due buckets: the due-index items of the hosts no due list names (see
// duelist.go for what every index item guarantees). A bucket holds the
// entries due in one slot of bucketSpan, at most bucketCap of them: an add
// is an update, billed on the whole item, so a bucket of 30 host keys keeps
// an add at one write unit. An add is conditional (not full); it is made
// by the host write's own attempt, before the host write, with the version
// that write is conditioned on. One that finds its bucket full goes to the
// next bucket of the slot.
//
// A bucket takes adds while its slot lasts (an add goes to the slot of its
// due time, or of now when that is past). Once the slot is over by
// closeMargin, the check deletes the bucket when every host it names has
// settled, conditional on the count of adds it read: an add that landed
// since makes the delete fail (the bucket is read again), and one that
// lands after it makes a new bucket of the same key (an add is an upsert),
// which the next query finds. So no close write is needed: the condition
// does what closing would, for one write less a bucket.

const (
	// bucketSpan is a bucket's slot: the default CheckHostPeriod, within
	// which due times are staggered anyway.
	bucketSpan = 5 * time.Second
	// bucketCap bounds a bucket's adds: ~30 bytes a host, one write unit.
	bucketCap = 30
	// closeMargin is how long after its slot a bucket may be deleted:
	// longer than a writer takes from reading its clock to its add (a
	// later add still lands, in a new bucket of the same key).
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
			// Not full.
			ConditionExpression: aws.String("attribute_not_exists(c) OR c < :cap"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":none": &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
				":h":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: key}}},
				":v":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: strconv.FormatInt(version, 10)}}},
				":d":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: strconv.FormatInt(due, 10)}}},
				":one":  &types.AttributeValueMemberN{Value: "1"},
				":cap":  &types.AttributeValueMemberN{Value: strconv.Itoa(bucketCap)},
			},
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
			return "", fmt.Errorf("add %s to a due bucket of shard %d: %d buckets full: %w", key, vs, try, err)
		}
		seq++
	}
}

// ripe tells whether it is a bucket whose adds are over: its slot ended
// closeMargin ago on the store's clock, so it may be deleted once settled.
func (s *Store) ripe(it *indexItem) bool {
	return it.bucket() && s.now().UnixMilli() >= itemTime(it.SK)+(bucketSpan+closeMargin).Milliseconds()
}
