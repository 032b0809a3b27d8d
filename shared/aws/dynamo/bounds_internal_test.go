package dynamo

// Tests of the bounds that keep a host item, and the store's memory,
// within limits, and of the outcome judgement on its own. They build the
// store's items directly, so they live inside the package.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/urldownloader/urldownloader/internal/billing"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// maxItemBytes is DynamoDB's item size limit, 400 KB.
const maxItemBytes = 400 << 10

// worstHostItem is the largest host item the store can write at
// PersistLimit limit: every URL 2048 bytes and appended alone, so each
// spills a chunk of its own (one chunk reference per URL, the inline tail
// full of small entries on top), every queued entry with a failed-attempt
// counter, the robots map at its bounds with the longest origins, the
// longest queue key and failure text, the full nonce history, every
// number at a size it can reach.
func worstHostItem(limit int) *hostItem {
	host := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	key := host + ":65535"
	it := &hostItem{
		PK: hostPK(key), SK: hostSK, VirtualShard: hostqueue.VirtualShards - 1,
		Listed: listSK(9_999_999_999_999, randomID(8)+"9999"), ListedDue: 9_999_999_999_999, Version: 1 << 50, LastFetch: 9_999_999_999_999, PauseUntil: 9_999_999_999_999, Errors: 1 << 20,
		FailingSince: 9_999_999_999_999, LastError: clip(strings.Repeat("é", maxLastError), maxLastError),
		TTL: 9_999_999_999, SpilledSinceEmpty: true, FirstChunkTaken: 0,
		Attempts: map[string]int{}, Robots: map[string]inlineRobots{},
	}
	for range nonceHistory {
		it.Nonces = append(it.Nonces, newNonce())
	}
	for i := range limit {
		it.Chunks = append(it.Chunks, chunkRef{ID: newChunkID(), Count: 1})
		// Result ids are 24 hex digits (urlmsg.MakeID).
		it.Attempts[fmt.Sprintf("%024x", i)] = params.MaxMaxAttempts
	}
	for entriesSize(it.Tail) <= inlineBudget {
		it.Tail = append(it.Tail, entryItem{ID: fmt.Sprintf("%024x", len(it.Tail)), URL: "https://" + host + "/"})
	}
	body := make([]byte, maxInlineRobotsBytes/maxInlineOrigins)
	for i := range maxInlineOrigins {
		origin := fmt.Sprintf("https://%s:%05d", host[:len(host)-2]+fmt.Sprintf("%02d", i), 65535-i)
		it.Robots[origin] = inlineRobots{Status: 503, GzipBody: body, FetchedAt: 9_999_999_999_999, StoredApart: true}
	}
	return it
}

// TestPersistLimitBoundFitsAnItem: at params.MaxPersistLimit the worst
// host item stays under DynamoDB's 400 KB with a quarter to spare, by
// DynamoDB's size rules (internal/billing), and moto stores it.
func TestPersistLimitBoundFitsAnItem(t *testing.T) {
	t.Parallel()
	it := worstHostItem(params.MaxPersistLimit)
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		t.Fatal(err)
	}
	size := billing.ItemSize(item)
	t.Logf("worst host item at PersistLimit %d: %d bytes (%.0f%% of 400 KB): chunk list %d, attempts %d, robots %d, inline tail %d",
		params.MaxPersistLimit, size, 100*float64(size)/maxItemBytes,
		billing.AttributeSize(item["c"]), billing.AttributeSize(item["at"]), billing.AttributeSize(item["rb"]), billing.AttributeSize(item["q"]))
	if size > maxItemBytes*3/4 {
		t.Errorf("worst host item is %d bytes, over three quarters of DynamoDB's %d: lower params.MaxPersistLimit", size, maxItemBytes)
	}
	// The bound is no wider than it need be for a reason: twice the limit
	// must not fit, or the test is not measuring what it says.
	if twice := billing.ItemSize(must(attributevalue.MarshalMap(worstHostItem(2 * params.MaxPersistLimit)))); twice <= size*3/2 {
		t.Errorf("twice the limit gives %d bytes against %d: the item does not grow with the queue as modelled", twice, size)
	}

	st, cfg := stack.DeployForTest(t, stack.Options{})
	db := dynamodb.NewFromConfig(cfg)
	if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &st.TableName, Item: item}); err != nil {
		t.Fatalf("store the worst host item: %v", err)
	}
	s := New(db, st.TableName, time.Now)
	back, err := s.getHost(t.Context(), it.PK)
	if err != nil {
		t.Fatal(err)
	}
	if back == nil || len(back.Chunks) != params.MaxPersistLimit || len(back.Attempts) != params.MaxPersistLimit || back.pending() != params.MaxPersistLimit+len(it.Tail) {
		t.Errorf("read back: %v", back != nil)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestPruneRobots: the robots map keeps at most maxInlineOrigins origins
// and maxInlineRobotsBytes of bodies, always the most recently fetched.
func TestPruneRobots(t *testing.T) {
	// answers adds n origins with bodies of size bytes, fetched at from,
	// from+1, ...
	answers := func(rb map[string]inlineRobots, n, size int, from int64) map[string]inlineRobots {
		for i := range n {
			rb[fmt.Sprintf("https://s%d.example", int(from)+i)] = inlineRobots{Status: 200, GzipBody: make([]byte, size), FetchedAt: from + int64(i)}
		}
		return rb
	}
	cases := []struct {
		name     string
		rb       map[string]inlineRobots
		wantKept int
	}{
		{"within bounds, untouched", answers(map[string]inlineRobots{}, maxInlineOrigins, 10, 0), maxInlineOrigins},
		{"too many origins", answers(map[string]inlineRobots{}, maxInlineOrigins+8, 0, 0), maxInlineOrigins},
		{"bodies over the budget", answers(map[string]inlineRobots{}, 20, 300, 0), maxInlineRobotsBytes / 300},
		{"marks for robots items count as origins", func() map[string]inlineRobots {
			rb := answers(map[string]inlineRobots{}, maxInlineOrigins, 0, 0)
			rb["https://big.example"] = inlineRobots{StoredApart: true, FetchedAt: 5000}
			return rb
		}(), maxInlineOrigins},
		{"no older answer slips in after a newer one did not fit",
			answers(answers(map[string]inlineRobots{}, 5, 0, 0), 7, 300, 100), 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.rb)
			pruneRobots(tc.rb)
			total := 0
			for _, ir := range tc.rb {
				total += len(ir.GzipBody)
			}
			if len(tc.rb) != tc.wantKept || total > maxInlineRobotsBytes {
				t.Errorf("kept %d origins with %d body bytes, want %d within %d bytes", len(tc.rb), total, tc.wantKept, maxInlineRobotsBytes)
			}
			var oldestKept int64 = 1 << 62
			var newestDropped int64 = -1
			for o, ir := range before {
				if _, ok := tc.rb[o]; ok {
					oldestKept = min(oldestKept, ir.FetchedAt)
				} else {
					newestDropped = max(newestDropped, ir.FetchedAt)
				}
			}
			if newestDropped >= oldestKept {
				t.Errorf("dropped an answer fetched at %d but kept one fetched at %d", newestDropped, oldestKept)
			}
		})
	}
}

// TestChunkCacheBoundedInBytes: a store that reads many large chunks keeps
// at most maxCachedBytes of them.
func TestChunkCacheBoundedInBytes(t *testing.T) {
	s := New(nil, "t", time.Now)
	big := make([]entryItem, 0, 600)
	for i := range cap(big) {
		big = append(big, entryItem{ID: fmt.Sprintf("%024x", i), URL: "https://h.example/" + strings.Repeat("p", 60)})
	}
	size := entriesSize(big)
	for i := range 2 * maxCachedBytes / size {
		s.cacheChunk("h#h.example", fmt.Sprint(i), big)
		if s.cachedBytes > maxCachedBytes {
			t.Fatalf("after %d chunks of %d bytes the cache holds %d bytes, over %d", i+1, size, s.cachedBytes, maxCachedBytes)
		}
	}
	if len(s.chunks) == 0 {
		t.Error("the cache keeps nothing")
	}
	s.uncacheChunk("h#h.example", "no such chunk")
	for id := range s.chunks {
		s.uncacheChunk("h#h.example", strings.TrimPrefix(id, "h#h.example\x00"))
	}
	if s.cachedBytes != 0 || len(s.chunks) != 0 {
		t.Errorf("after removing every chunk: %d bytes, %d chunks", s.cachedBytes, len(s.chunks))
	}
}

// TestJudge: what the store concludes about a write from the item read
// after its answer was lost.
func TestJudge(t *testing.T) {
	mine := &hostWrite{next: &hostItem{Nonces: []string{"mine"}}, prev: 7, spilled: []string{chunkPrefix + "c-mine"}}
	creating := &hostWrite{next: &hostItem{Nonces: []string{"mine"}}, prev: 0}
	item := func(v int64, nonces []string, chunks ...string) *hostItem {
		it := &hostItem{Version: v, Nonces: nonces}
		for _, c := range chunks {
			it.Chunks = append(it.Chunks, chunkRef{ID: c, Count: 1})
		}
		return it
	}
	cases := []struct {
		name string
		w    *hostWrite
		cur  *hostItem
		want verdict
	}{
		{"landed, latest", mine, item(8, []string{"mine", "x"}), landed},
		{"landed, two writes on top", mine, item(10, []string{"c", "b", "mine", "x"}), landed},
		{"another took the version", mine, item(8, []string{"other", "x"}), lost},
		{"another took it, writes on top", mine, item(10, []string{"c", "b", "other", "x"}), lost},
		{"still at the version expected", mine, item(7, []string{"x"}), pending},
		{"item gone", mine, nil, lost},
		{"creating, none yet", creating, nil, pending},
		{"created", creating, item(1, []string{"mine"}), landed},
		{"another created it", creating, item(1, []string{"other"}), lost},
		{"beyond the history, own chunk referenced", mine, item(20, []string{"a", "b", "c", "d"}, "c-other", "c-mine"), landed},
		{"beyond the history, nothing of its own", mine, item(20, []string{"a", "b", "c", "d"}, "c-other"), unknown},
		{"an item written before nonces", mine, item(8, nil), unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := judge(tc.cur, tc.w); got != tc.want {
				t.Errorf("judge = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWithNonceKeepsHistory(t *testing.T) {
	var h []string
	for i := range 10 {
		h = withNonce(h, fmt.Sprint(i))
	}
	if want := []string{"9", "8", "7", "6"}; !slices.Equal(h, want) || len(h) != nonceHistory {
		t.Errorf("history %v, want %v", h, want)
	}
	if a, b := newNonce(), newNonce(); a == b || len(a) < 13 {
		t.Errorf("nonces %q %q: want distinct, 64 bits", a, b)
	}
	if id := newChunkID(); len(id) != 20 {
		t.Errorf("chunk id %q: want 96 bits in 20 base32 characters", id)
	}
}
