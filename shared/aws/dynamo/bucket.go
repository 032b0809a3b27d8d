package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Due buckets: the due-index items of the hosts no due list names (see
// duelist.go for what every index item guarantees). A bucket holds the
// entries due in one slot of bucketSpan, at most bucketCap of them: an add
// is an update, billed on the whole item, so a bucket of 30 host keys keeps
// an add at one write unit. An add is conditional (not full); it is made
// by the host write's own attempt, before the host write, with the version
// that write is conditioned on. One that finds its bucket full goes on to
// the slot's newest bucket, which a query finds (the store remembers per
// shard and slot where its adds go, so it rarely needs to ask). A slot's
// buckets take the shard's sub-keys in turn (bucketSub, layout.go).
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
	// maxBucketTries bounds the adds one add makes. Every add refused
	// after the first jumps to the slot's newest bucket, so only writers
	// filling a whole bucket between each of its tries use them up: at
	// most 1,000 adds a second on a key, 64 buckets of 30 are two seconds
	// of a key's whole throughput.
	maxBucketTries = 64
	// maxPositions bounds the bucket positions the store remembers: past
	// it, the positions of slots that are over are dropped.
	maxPositions = 4096
)

// bucketSK is a bucket's sort key: its slot's start first (see listSK),
// then its sequence number in the slot, padded so that a slot's buckets
// sort in the order they were opened (unique in the shard, not across
// shards: a host's Listed names its item by sort key, in the shard the
// host is stored in; see hostSeen.joins).
func bucketSK(slot int64, seq int) string {
	return fmt.Sprintf("%013d%s%05d", slot, bucketMark, seq)
}

// bucketSub is the sub-key of a slot's bucket seq: the slot's buckets take
// the shard's sub-keys in turn, starting at one of the slot's own, so a
// shard's adds spread over its sub-keys as fast as they fill buckets (and
// over many slots, by slot), while a slot with few adds still fills one
// bucket (one delete for them all).
func bucketSub(slot int64, seq int) int {
	return int((slot/bucketSpan.Milliseconds() + int64(seq)) % dueSpread)
}

// bucketSeq is the sequence number of a bucket's sort key (-1: none).
func bucketSeq(sk string) int {
	_, seq, ok := strings.Cut(sk, bucketMark)
	n, err := strconv.Atoi(seq)
	if !ok || err != nil {
		return -1
	}
	return n
}

// slotKey names one slot of a shard: the store remembers, for each, the
// bucket its adds go to next.
type slotKey struct {
	vs   int
	slot int64
}

// addToBucket adds key, at version (the version its host write is
// conditioned on), due at due (ms), to a bucket of vs, the shard that
// write puts it in: the slot of due, or of now when that is later. It
// returns the bucket's sort key. Under a lost answer the add may land
// twice (a duplicate entry, which reads as one) or land while an error
// comes back (a stale entry, settled by the host's version): neither loses
// a host.
func (s *Store) addToBucket(ctx context.Context, key string, vs int, version, due int64) (string, error) {
	span := bucketSpan.Milliseconds()
	slot := max(due, s.now().UnixMilli())
	slot -= slot % span
	at := slotKey{vs, slot}
	s.mu.Lock()
	seq := s.positions[at]
	s.mu.Unlock()
	for try := 1; ; try++ {
		pk, sk := duePK(vs, bucketSub(slot, seq)), bucketSK(slot, seq)
		_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:        &s.table,
			Key:              itemKey(pk, sk),
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
			s.remember(at, seq)
			return sk, nil
		}
		var cf *types.ConditionalCheckFailedException
		if !errors.As(err, &cf) {
			return "", fmt.Errorf("add %s to due bucket %s of %s: %w", key, sk, pk, err)
		}
		if try >= maxBucketTries {
			return "", fmt.Errorf("add %s to a due bucket of shard %d: %d adds refused, each bucket filled by others meanwhile: %w", key, vs, try, err)
		}
		seq = max(seq+1, s.newestBucket(ctx, vs, slot))
	}
}

// remember records that slot at's adds go to bucket seq next (later
// buckets only), dropping the positions of slots that are over when the
// store remembers too many.
func (s *Store) remember(at slotKey, seq int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.positions[at] {
		return
	}
	if _, ok := s.positions[at]; !ok && len(s.positions) >= maxPositions {
		over := s.now().UnixMilli() - bucketSpan.Milliseconds()
		for k := range s.positions {
			if k.slot < over {
				delete(s.positions, k)
			}
		}
		if len(s.positions) >= maxPositions {
			clear(s.positions) // a forgotten position costs a refused add and a query
		}
	}
	s.positions[at] = seq
}

// newestBucket is the sequence number of the newest bucket of vs's slot,
// the one after it when that one is full (-1: none found, or the queries
// failed; the caller walks on). One consistent query of one item a
// sub-key, side by side: an add refused by a full bucket costs those
// reads, not a walk through every full bucket of the slot.
func (s *Store) newestBucket(ctx context.Context, vs int, slot int64) int {
	newest := make([]int, dueSpread)
	parallel(dueSpread, func(sub int) {
		newest[sub] = -1
		out, err := s.client.Query(ctx, &dynamodb.QueryInput{
			TableName:              &s.table,
			ConsistentRead:         aws.Bool(true),
			KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :slot)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk":   &types.AttributeValueMemberS{Value: duePK(vs, sub)},
				":slot": &types.AttributeValueMemberS{Value: fmt.Sprintf("%013d%s", slot, bucketMark)},
			},
			ProjectionExpression: aws.String("sk, c"),
			ScanIndexForward:     aws.Bool(false),
			Limit:                aws.Int32(1),
		})
		if err != nil || len(out.Items) == 0 {
			return
		}
		var it indexItem
		if attributevalue.UnmarshalMap(out.Items[0], &it) != nil {
			return
		}
		if seq := bucketSeq(it.SK); seq >= 0 && it.Count >= bucketCap {
			newest[sub] = seq + 1
		} else {
			newest[sub] = seq
		}
	})
	return slices.Max(newest)
}

// ripe tells whether it is a bucket whose adds are over: its slot ended
// closeMargin ago on the store's clock, so it may be deleted once settled.
func (s *Store) ripe(it *indexItem) bool {
	return it.bucket() && s.now().UnixMilli() >= itemTime(it.SK)+(bucketSpan+closeMargin).Milliseconds()
}
