package dynamo_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// keysInShard returns n queue keys that hash into virtual shard vs.
func keysInShard(tag string, vs, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("%s%d.example", tag, i)
		if hostqueue.VirtualShard(k) == vs {
			out = append(out, k)
		}
	}
	return out
}

// putDueHosts writes host items due at due for keys of virtual shard vs
// directly, in batches, and one due list naming them all: the layout's
// host item with version 1, one queued entry, joined to the list.
func (e *env) putDueHosts(keys []string, vs int, due time.Time) {
	e.t.Helper()
	sk := fmt.Sprintf("%013d#l#test", due.UnixMilli())
	var names, versions []types.AttributeValue
	reqs := []types.WriteRequest{}
	for _, k := range keys {
		names = append(names, &types.AttributeValueMemberS{Value: k})
		versions = append(versions, &types.AttributeValueMemberN{Value: "0"})
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "h#" + k},
			"sk": &types.AttributeValueMemberS{Value: "h"},
			"vs": &types.AttributeValueMemberN{Value: fmt.Sprint(vs)},
			"ix": &types.AttributeValueMemberS{Value: sk},
			"dd": &types.AttributeValueMemberN{Value: fmt.Sprint(due.UnixMilli())},
			"v":  &types.AttributeValueMemberN{Value: "1"},
			"q": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"i": &types.AttributeValueMemberS{Value: "d-" + k},
				"u": &types.AttributeValueMemberS{Value: "https://" + k + "/"},
			}}}},
		}}})
	}
	if _, err := e.db.PutItem(e.t.Context(), &dynamodb.PutItemInput{TableName: &e.table, Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("d#%d", vs)},
		"sk": &types.AttributeValueMemberS{Value: sk},
		"h":  &types.AttributeValueMemberL{Value: names},
		"hv": &types.AttributeValueMemberL{Value: versions},
		"t":  &types.AttributeValueMemberN{Value: fmt.Sprint(due.UnixMilli())},
		"n":  &types.AttributeValueMemberS{Value: "test"},
	}}); err != nil {
		e.t.Fatalf("write the due list: %v", err)
	}
	for len(reqs) > 0 {
		batch := reqs[:min(25, len(reqs))]
		reqs = reqs[len(batch):]
		out, err := e.db.BatchWriteItem(e.t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{e.table: batch}})
		if err != nil {
			e.t.Fatalf("write %d host items: %v", len(batch), err)
		}
		reqs = append(reqs, out.UnprocessedItems[e.table]...)
	}
}

func (e *env) appendDue(key string, due time.Time) {
	e.t.Helper()
	if _, err := e.store.Append(e.t.Context(), hostqueue.AppendRequest{Key: key, Entries: entries("d", 0, 1, 50), Limit: 10, Due: due}); err != nil {
		e.t.Fatalf("append to %s: %v", key, err)
	}
}

func TestDueHosts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const vs = 3

	// In shard 3: eight hosts due at t0-8s .. t0-1s and one due exactly at
	// t0, four due a minute later, one released (no work), and hosts of
	// every other shard due now.
	keys := keysInShard("due", vs, 14)
	var due []string
	for i, k := range keys[:9] {
		e.appendDue(k, t0.Add(-time.Duration(8-i)*time.Second))
		due = append(due, k)
	}
	for _, k := range keys[9:13] {
		e.appendDue(k, t0.Add(time.Minute))
	}
	idle := keys[13]
	e.appendDue(idle, t0.Add(-time.Hour))
	if _, err := e.store.Commit(ctx, idle, hostqueue.Commit{Done: []string{"d-00000"}, Release: true, IdleTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for v := range hostqueue.VirtualShards {
		if v != vs {
			e.appendDue(keysInShard("other", v, 1)[0], t0.Add(-time.Hour))
		}
	}

	got, err := e.store.DueHosts(ctx, vs, t0, 100)
	if err != nil {
		t.Fatal(err)
	}
	// The index sorts by due: the longest-waiting hosts come first.
	if !slices.Equal(got, due) {
		t.Errorf("DueHosts(shard %d, t0) =\n  %v\nwant, earliest due first,\n  %v", vs, got, due)
	}
	got, err = e.store.DueHosts(ctx, vs, t0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, due[:3]) {
		t.Errorf("DueHosts(limit 3) = %v, want %v", got, due[:3])
	}
	got, err = e.store.DueHosts(ctx, vs, t0.Add(time.Minute), 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := keys[:13]; !sameSet(got, want) {
		t.Errorf("DueHosts(t0+1m) = %v, want %v", got, want)
	}
	got, err = e.store.DueHosts(ctx, vs, t0.Add(-time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("DueHosts before anything is due = %v", got)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestDueHostsPaginates puts more due hosts in one shard than one Query
// page of DueHosts (1000 items) returns. Most host items are written
// straight into the table, 25 to a request, as the store would write a
// host with one queued URL (DueHosts reads only the index's keys); the
// last few through Append.
func TestDueHostsPaginates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const vs, n, appended = 5, 1150, 50
	keys := keysInShard("page", vs, n)
	e.putDueHosts(keys[:n-appended], vs, t0)
	for _, k := range keys[n-appended:] {
		e.appendDue(k, t0)
	}

	// More than there are: every page, until the last says it is the
	// last. One past a page: a second page, cut at the limit. (Each moto
	// page of 1000 costs it a second; a limit within one page is the
	// contract's case, storetest's DueHosts.)
	for _, limit := range []int{n + 100, 1001} {
		got, err := e.store.DueHosts(ctx, vs, t0, limit)
		if err != nil {
			t.Fatalf("DueHosts(limit %d): %v", limit, err)
		}
		if len(got) != min(limit, n) {
			t.Errorf("DueHosts(limit %d) returned %d keys, want %d", limit, len(got), min(limit, n))
		}
		if limit >= n && !sameSet(got, keys) {
			t.Errorf("DueHosts(limit %d) is not the %d hosts of the shard", limit, n)
		}
		seen := map[string]bool{}
		for _, k := range got {
			if seen[k] {
				t.Errorf("DueHosts(limit %d) lists %s twice", limit, k)
			}
			seen[k] = true
		}
	}
}

func TestShardLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const vs = 7
	acquire := func(owner string, until, now time.Time) bool {
		t.Helper()
		ok, err := e.store.AcquireShard(ctx, vs, owner, until, now)
		if err != nil {
			t.Fatalf("AcquireShard(%s): %v", owner, err)
		}
		return ok
	}
	release := func(owner string) {
		t.Helper()
		if err := e.store.ReleaseShard(ctx, vs, owner); err != nil {
			t.Fatalf("ReleaseShard(%s): %v", owner, err)
		}
	}

	release("a") // no lease yet: nothing to give back, and no error
	if !acquire("a", t0.Add(time.Minute), t0) {
		t.Fatal("a free shard was refused")
	}
	if acquire("b", t0.Add(time.Minute), t0.Add(30*time.Second)) {
		t.Error("b took a's live lease")
	}
	if !acquire("a", t0.Add(2*time.Minute), t0.Add(30*time.Second)) {
		t.Error("a could not renew its own lease")
	}
	// The renewal counts: at t0+90s the first lease would be over.
	if acquire("b", t0.Add(3*time.Minute), t0.Add(90*time.Second)) {
		t.Error("b took a's renewed lease before it ran out")
	}
	if !acquire("b", t0.Add(5*time.Minute), t0.Add(2*time.Minute+time.Millisecond)) {
		t.Error("b could not take a's expired lease")
	}
	if acquire("a", t0.Add(5*time.Minute), t0.Add(3*time.Minute)) {
		t.Error("a got the shard back while b holds it")
	}
	release("a") // not the owner: must not free b's lease
	if acquire("c", t0.Add(5*time.Minute), t0.Add(3*time.Minute)) {
		t.Error("a released b's lease")
	}
	release("b")
	if !acquire("c", t0.Add(5*time.Minute), t0.Add(3*time.Minute)) {
		t.Error("b's released lease could not be taken")
	}
	// Other shards are independent.
	if ok, err := e.store.AcquireShard(ctx, vs+1, "a", t0.Add(time.Minute), t0); err != nil || !ok {
		t.Errorf("shard %d: ok %v err %v, want a free lease", vs+1, ok, err)
	}

	// Many invocations racing for a free shard: exactly one wins. (Through
	// atomicConditions: moto alone may let two conditional writes through.)
	racers := e.wrapped(atomicConditions{Client: e.db, mu: &sync.Mutex{}})
	var wins atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 12 {
		wg.Go(func() {
			<-start
			ok, err := racers.AcquireShard(ctx, 11, fmt.Sprintf("racer-%d", i), t0.Add(time.Minute), t0)
			if err != nil {
				t.Errorf("racer %d: %v", i, err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d racers acquired one shard, want exactly 1", wins.Load())
	}
}

func TestRobots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.readYourWrites() // the robots cache's GetItem right after the commit
	ctx := t.Context()
	const key = "robots.example"
	fetched := t0.Add(-time.Minute)

	if r, err := e.store.Robots(ctx, key, "https://robots.example"); err != nil || r != nil {
		t.Fatalf("nothing stored: Robots = %+v, %v; want nil, nil", r, err)
	}

	var big strings.Builder
	for i := 0; big.Len() < 300<<10; i++ {
		fmt.Fprintf(&big, "User-agent: bot%d\nDisallow: /private/%d/\nCrawl-delay: %d\n\n", i, i, i%30)
	}
	binary := make([]byte, 64<<10)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(binary)
	copy(binary, "User-agent: *\nDisallow: /\n\x00\xff")

	cases := []struct {
		name   string
		origin string
		r      hostqueue.Robots
	}{
		{"small", "https://robots.example", hostqueue.Robots{Status: 200, Body: []byte("User-agent: *\nDisallow: /x\n"), FetchedAt: fetched}},
		{"other origin of the key", "http://robots.example:8080", hostqueue.Robots{Status: 200, Body: []byte("User-agent: *\nAllow: /\n"), FetchedAt: fetched}},
		{"status only", "https://sub.robots.example", hostqueue.Robots{Status: 503, FetchedAt: fetched}},
		{"300 KB of text", "https://big.robots.example", hostqueue.Robots{Status: 200, Body: []byte(big.String()), FetchedAt: fetched}},
		{"binary", "https://bin.robots.example", hostqueue.Robots{Status: 200, Body: binary, FetchedAt: fetched}},
	}
	for _, tc := range cases {
		if err := e.store.PutRobots(ctx, key, tc.origin, tc.r); err != nil {
			t.Fatalf("%s: PutRobots: %v", tc.name, err)
		}
	}
	for _, tc := range cases {
		got, err := e.fresh().Robots(ctx, key, tc.origin)
		if err != nil {
			t.Fatalf("%s: Robots: %v", tc.name, err)
		}
		if got == nil {
			t.Errorf("%s: nothing read back", tc.name)
			continue
		}
		if got.Status != tc.r.Status || !got.FetchedAt.Equal(tc.r.FetchedAt) || !bytes.Equal(got.Body, tc.r.Body) {
			t.Errorf("%s: read back status %d at %v, %d body bytes; want %d at %v, %d bytes (equal: %v)",
				tc.name, got.Status, got.FetchedAt, len(got.Body), tc.r.Status, tc.r.FetchedAt, len(tc.r.Body), bytes.Equal(got.Body, tc.r.Body))
		}
	}

	// Replacing one keeps the newest.
	newer := hostqueue.Robots{Status: 404, FetchedAt: t0}
	if err := e.store.PutRobots(ctx, key, "https://robots.example", newer); err != nil {
		t.Fatal(err)
	}
	if got, err := e.store.Robots(ctx, key, "https://robots.example"); err != nil || got.Status != 404 || len(got.Body) != 0 || !got.FetchedAt.Equal(t0) {
		t.Errorf("after replacing: %+v, %v", got, err)
	}

	// Robots items live under the host's partition but are not part of its
	// queue: the host can be appended to and drained around them.
	e.append(key, entries("r", 0, 5, 200), 100)
	e.wantHead(key, idRange("r", 0, 5))
	e.checkChunks(key)

	// An incompressible body too big for an item is cut at a line, not
	// refused: what is kept is a prefix of what was fetched.
	huge := make([]byte, 900<<10)
	_, _ = rng.Read(huge)
	for i := 100; i < len(huge); i += 100 {
		huge[i] = '\n'
	}
	if err := e.store.PutRobots(ctx, key, "https://huge.robots.example", hostqueue.Robots{Status: 200, Body: huge, FetchedAt: t0}); err != nil {
		t.Fatalf("PutRobots of 900 KB of noise: %v", err)
	}
	got, err := e.store.Robots(ctx, key, "https://huge.robots.example")
	if err != nil || got == nil {
		t.Fatalf("Robots after a huge put: %+v, %v", got, err)
	}
	if len(got.Body) == 0 || len(got.Body) >= len(huge) || !bytes.HasPrefix(huge, got.Body) || got.Body[len(got.Body)-1] != '\n' {
		t.Errorf("huge body kept as %d bytes: want a non-empty proper prefix of the %d fetched, ending at a line", len(got.Body), len(huge))
	}
}

// leaseWrites counts the lease writes a client makes.
type leaseWrites struct {
	dynamo.Client
	writes atomic.Int64
}

func (c *leaseWrites) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if sk, ok := in.Item["sk"].(*types.AttributeValueMemberS); ok && sk.Value == "l" {
		c.writes.Add(1)
	}
	return c.Client.PutItem(ctx, in, opt...)
}

// TestShardLeaseWaitReadsFirst: a run waiting for a shard another run
// holds pays one failed write, then reads until the lease is free, expired
// or its own, and takes it at once when it is.
func TestShardLeaseWaitReadsFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const vs = 9
	if ok, err := e.store.AcquireShard(ctx, vs, "holder", t0.Add(time.Minute), t0); err != nil || !ok {
		t.Fatalf("holder: %v %v", ok, err)
	}
	c := &leaseWrites{Client: e.db}
	waiter := e.wrapped(c)
	for i := range 5 {
		ok, err := waiter.AcquireShard(ctx, vs, "waiter", t0.Add(time.Minute), t0.Add(time.Duration(i)*time.Second))
		if err != nil || ok {
			t.Fatalf("attempt %d on a held shard: %v %v", i, ok, err)
		}
	}
	if n := c.writes.Load(); n != 1 {
		t.Errorf("5 attempts on a held shard made %d lease writes, want 1 (then reads)", n)
	}
	// Released: the next attempt takes it.
	if err := e.store.ReleaseShard(ctx, vs, "holder"); err != nil {
		t.Fatal(err)
	}
	if ok, err := waiter.AcquireShard(ctx, vs, "waiter", t0.Add(time.Minute), t0.Add(5*time.Second)); err != nil || !ok {
		t.Errorf("after the release: %v %v, want the shard", ok, err)
	}
	// Another run now waits on the waiter's lease: the waiter still renews
	// its own, and the other takes it once it has run out.
	if ok, _ := e.store.AcquireShard(ctx, vs, "third", t0.Add(2*time.Minute), t0.Add(30*time.Second)); ok {
		t.Fatal("third took the waiter's live lease")
	}
	if ok, err := waiter.AcquireShard(ctx, vs, "waiter", t0.Add(3*time.Minute), t0.Add(40*time.Second)); err != nil || !ok {
		t.Errorf("renewing its own lease while another waited: %v %v", ok, err)
	}
	if ok, _ := e.store.AcquireShard(ctx, vs, "third", t0.Add(4*time.Minute), t0.Add(2*time.Minute)); ok {
		t.Error("third took the renewed lease before it ran out")
	}
	if ok, err := e.store.AcquireShard(ctx, vs, "third", t0.Add(4*time.Minute), t0.Add(3*time.Minute+time.Millisecond)); err != nil || !ok {
		t.Errorf("third after the lease ran out: %v %v, want the shard", ok, err)
	}
}
