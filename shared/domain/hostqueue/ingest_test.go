package hostqueue_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// fakeStore is a hostqueue.Appender whose Append each test sets: all the
// Ingester may call.
type fakeStore struct {
	t      *testing.T
	append func(ctx context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error)

	mu    sync.Mutex
	calls []hostqueue.AppendRequest
}

var _ hostqueue.Appender = (*fakeStore)(nil)

func (s *fakeStore) Append(ctx context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
	s.mu.Lock()
	s.calls = append(s.calls, req)
	s.mu.Unlock()
	if s.append == nil {
		return hostqueue.AppendResult{Appended: len(req.Entries), Pending: len(req.Entries)}, nil
	}
	return s.append(ctx, req)
}

// byKey returns the recorded appends by key, failing on a key appended twice.
func (s *fakeStore) byKey() map[string]hostqueue.AppendRequest {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]hostqueue.AppendRequest{}
	for _, c := range s.calls {
		if _, dup := out[c.Key]; dup {
			s.t.Errorf("key %q appended more than once in one batch", c.Key)
		}
		out[c.Key] = c
	}
	return out
}

// fakePublisher records published results; err, when set, fails Publish.
type fakePublisher struct {
	mu        sync.Mutex
	err       error
	published []result.Result
}

func (p *fakePublisher) Publish(_ context.Context, rs []result.Result) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	p.published = append(p.published, rs...)
	return nil
}

var testNow = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("X", 3600))

func msg(id, host, url string) urlmsg.Message {
	return urlmsg.Message{ID: id, Host: host, URL: url}
}

func entryIDs(es []hostqueue.Entry) []string {
	var ids []string
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

func TestIngestGroupsByHost(t *testing.T) {
	store := &fakeStore{t: t}
	in := &hostqueue.Ingester{Store: store, Publisher: &fakePublisher{}, Now: func() time.Time { return testNow }}
	p := hostqueue.IngestParams{PersistLimit: 50}
	msgs := []urlmsg.Message{
		msg("a1", "a.example", "http://a.example/1"),
		msg("b1", "b.example:8080", "http://b.example:8080/1"),
		msg("a2", "a.example", "http://a.example/2"),
		msg("c1", "c.example", "https://c.example/1"),
		{ID: "a3", Host: "a.example", URL: "http://a.example/3", ETag: `"e3"`, LastModified: "Tue, 01 Jan 2030 00:00:00 GMT"},
		msg("b2", "b.example:8080", "http://b.example:8080/2"),
	}
	res := in.Ingest(context.Background(), p, msgs)

	if len(res.Failed) != 0 {
		t.Errorf("Failed = %v, want none", res.Failed)
	}
	if res.Appended != len(msgs) {
		t.Errorf("Appended = %d, want %d", res.Appended, len(msgs))
	}
	got := store.byKey()
	want := map[string][]string{
		"a.example":      {"a1", "a2", "a3"},
		"b.example:8080": {"b1", "b2"},
		"c.example":      {"c1"},
	}
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("appended keys %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for key, ids := range want {
		req := got[key]
		if !slices.Equal(entryIDs(req.Entries), ids) {
			t.Errorf("%s entries %v, want %v in message order", key, entryIDs(req.Entries), ids)
		}
		if req.Limit != 50 {
			t.Errorf("%s Limit = %d, want PersistLimit 50", key, req.Limit)
		}
		// A host that becomes active is due at once (the first request
		// waits only for its politeness state, not for a stagger slot).
		if !req.Due.Equal(testNow) {
			t.Errorf("%s Due = %v, want now (%v)", key, req.Due, testNow)
		}
		if req.OnEvict == nil {
			t.Errorf("%s has no OnEvict", key)
		}
	}
	a3 := got["a.example"].Entries[2]
	if a3 != (hostqueue.Entry{ID: "a3", URL: "http://a.example/3", ETag: `"e3"`, LastModified: "Tue, 01 Jan 2030 00:00:00 GMT"}) {
		t.Errorf("entry a3 = %+v, want URL, ETag and LastModified carried", a3)
	}
}

func TestIngestEmptyBatch(t *testing.T) {
	store := &fakeStore{t: t}
	in := &hostqueue.Ingester{Store: store, Publisher: &fakePublisher{}, Now: func() time.Time { return testNow }}
	res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 10}, nil)
	if len(store.calls) != 0 || len(res.Failed) != 0 || res.Appended != 0 {
		t.Errorf("empty batch: %d appends, result %+v", len(store.calls), res)
	}
}

func TestIngestByDomain(t *testing.T) {
	store := &fakeStore{t: t}
	in := &hostqueue.Ingester{Store: store, Publisher: &fakePublisher{}, Now: func() time.Time { return testNow }}
	p := hostqueue.IngestParams{PersistLimit: 10, ByDomain: true}
	msgs := []urlmsg.Message{
		msg("1", "www.example.co.uk", "http://www.example.co.uk/"),
		msg("2", "img.example.co.uk", "http://img.example.co.uk/"),
		msg("3", "example.co.uk", "http://example.co.uk/"),
		msg("4", "a.example.org:8080", "http://a.example.org:8080/"),
		msg("5", "b.example.org", "http://b.example.org/"),
		msg("6", "127.0.0.2:8080", "http://127.0.0.2:8080/"),
		msg("7", "localhost:3000", "http://localhost:3000/"),
	}
	res := in.Ingest(context.Background(), p, msgs)
	if len(res.Failed) != 0 {
		t.Fatalf("Failed = %v", res.Failed)
	}
	got := map[string][]string{}
	for k, req := range store.byKey() {
		got[k] = entryIDs(req.Entries)
		if !req.Due.Equal(testNow) {
			t.Errorf("%s Due = %v, want now (%v)", k, req.Due, testNow)
		}
	}
	want := map[string][]string{
		"example.co.uk":    {"1", "2", "3"},
		"example.org:8080": {"4"},
		"example.org":      {"5"},
		"127.0.0.2:8080":   {"6"},
		"localhost:3000":   {"7"},
	}
	if !maps.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("domain groups %v, want %v", got, want)
	}
}

func TestIngestFailedAppendFailsOnlyThatHost(t *testing.T) {
	boom := errors.New("throttled")
	store := &fakeStore{t: t}
	store.append = func(_ context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
		if req.Key == "b.example" {
			return hostqueue.AppendResult{}, boom
		}
		return hostqueue.AppendResult{Appended: len(req.Entries), Evicted: 1, Pending: 7}, nil
	}
	in := &hostqueue.Ingester{Store: store, Publisher: &fakePublisher{}, Now: func() time.Time { return testNow }}
	msgs := []urlmsg.Message{
		msg("a1", "a.example", "http://a.example/1"),
		msg("b1", "b.example", "http://b.example/1"),
		msg("c1", "c.example", "http://c.example/1"),
		msg("a2", "a.example", "http://a.example/2"),
		msg("b2", "b.example", "http://b.example/2"),
	}
	res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 10}, msgs)

	if got := slices.Sorted(maps.Keys(res.Failed)); !slices.Equal(got, []int{1, 4}) {
		t.Fatalf("failed indices %v, want [1 4] (the b.example messages)", got)
	}
	for i, err := range res.Failed {
		if !errors.Is(err, boom) {
			t.Errorf("message %d: error %v does not wrap the store's error", i, err)
		}
		if !strings.Contains(err.Error(), "append 2 urls to b.example") {
			t.Errorf("message %d: error %q does not say what was being done", i, err)
		}
	}
	if res.Appended != 3 || res.Evicted != 2 {
		t.Errorf("Appended %d Evicted %d, want 3 and 2 (from a.example and c.example only)", res.Appended, res.Evicted)
	}
}

func TestIngestOnEvictPublishesDropped(t *testing.T) {
	pub := &fakePublisher{}
	store := &fakeStore{t: t}
	store.append = func(ctx context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
		// The store keeps the newest Limit entries: the first incoming go.
		over := len(req.Entries) - req.Limit
		if over > 0 {
			if err := req.OnEvict(ctx, req.Entries[:over]); err != nil {
				return hostqueue.AppendResult{}, err
			}
		}
		return hostqueue.AppendResult{Appended: len(req.Entries), Evicted: max(over, 0), Pending: min(len(req.Entries), req.Limit)}, nil
	}
	later := testNow.Add(3 * time.Second)
	clock := []time.Time{testNow, later}
	var calls atomic.Int32
	in := &hostqueue.Ingester{Store: store, Publisher: pub, Now: func() time.Time {
		n := int(calls.Add(1)) - 1
		return clock[min(n, len(clock)-1)]
	}}
	msgs := []urlmsg.Message{
		msg("x1", "x.example:8080", "http://x.example:8080/1"),
		msg("x2", "x.example:8080", "http://x.example:8080/2"),
		msg("x3", "x.example:8080", "http://x.example:8080/3"),
		msg("y1", "y.example", "http://y.example/1"),
	}
	res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 2}, msgs)
	if len(res.Failed) != 0 || res.Evicted != 1 || res.Appended != 4 {
		t.Fatalf("result %+v, want 4 appended, 1 evicted, none failed", res)
	}
	if len(pub.published) != 1 {
		t.Fatalf("published %d results, want 1: %+v", len(pub.published), pub.published)
	}
	r := pub.published[0]
	if r.ID != "x1" || r.URL != "http://x.example:8080/1" || r.Host != "x.example:8080" || r.Status != result.StatusDropped {
		t.Errorf("dropped result %+v, want id x1, its url and host, status dropped", r)
	}
	if !strings.Contains(r.Error, "PersistLimit") || !strings.Contains(r.Error, "(2)") {
		t.Errorf("dropped result error %q does not name PersistLimit and its value", r.Error)
	}
	if !r.FetchedAt.Equal(later) || r.FetchedAt.Location() != time.UTC {
		t.Errorf("FetchedAt = %v, want the eviction time %v in UTC", r.FetchedAt, later.UTC())
	}
}

func TestIngestHoldBack(t *testing.T) {
	pub := &fakePublisher{}
	store := &fakeStore{t: t}
	store.append = func(ctx context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
		if !req.HoldBack {
			t.Errorf("append of %s without HoldBack", req.Key)
		}
		// Room for 2 per host: the last incoming are held back.
		held := max(len(req.Entries)-2, 0)
		return hostqueue.AppendResult{Appended: len(req.Entries) - held, HeldBack: held, Pending: 2}, nil
	}
	in := &hostqueue.Ingester{Store: store, Publisher: pub, Now: func() time.Time { return testNow }, Overflow: hostqueue.HoldBack}
	msgs := []urlmsg.Message{
		msg("x1", "x.example", "http://x.example/1"),
		msg("y1", "y.example", "http://y.example/1"),
		msg("x2", "x.example", "http://x.example/2"),
		msg("x3", "x.example", "http://x.example/3"),
		msg("x4", "x.example", "http://x.example/4"),
	}
	res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 2}, msgs)
	if res.Appended != 3 || res.HeldBack != 2 || res.Evicted != 0 || len(pub.published) != 0 {
		t.Fatalf("result %+v, published %d, want 3 appended, 2 held back, nothing evicted or published", res, len(pub.published))
	}
	if got := slices.Sorted(maps.Keys(res.Failed)); !slices.Equal(got, []int{3, 4}) {
		t.Fatalf("failed %v, want the two last of x.example (3, 4)", got)
	}
	for i, err := range res.Failed {
		if !errors.Is(err, hostqueue.ErrQueueFull) || !strings.Contains(err.Error(), "x.example") {
			t.Errorf("message %d failed with %v, want ErrQueueFull naming the host", i, err)
		}
	}
}

func TestIngestOnEvictPublishFailure(t *testing.T) {
	boom := errors.New("sqs down")
	pub := &fakePublisher{err: boom}
	var evictErr error
	store := &fakeStore{t: t}
	store.append = func(ctx context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
		evictErr = req.OnEvict(ctx, req.Entries[:1])
		if evictErr != nil {
			return hostqueue.AppendResult{}, evictErr // nothing written
		}
		return hostqueue.AppendResult{Appended: len(req.Entries)}, nil
	}
	in := &hostqueue.Ingester{Store: store, Publisher: pub, Now: func() time.Time { return testNow }, Concurrency: 1}
	res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 1},
		[]urlmsg.Message{msg("x1", "x.example", "http://x.example/1"), msg("x2", "x.example", "http://x.example/2")})
	if !errors.Is(evictErr, boom) {
		t.Fatalf("OnEvict returned %v, want the publisher's error", evictErr)
	}
	if len(res.Failed) != 2 || !errors.Is(res.Failed[0], boom) || !errors.Is(res.Failed[1], boom) {
		t.Errorf("Failed = %v, want both messages failed with the publish error", res.Failed)
	}
}

// TestIngestBoundsConcurrency: with Concurrency 2, no more than two
// appends run at once, and every host is still written. Each append blocks
// until the test releases it, and the test releases one only when two are
// waiting and the other goroutines have had the chance to run, so an
// unbounded implementation shows more than two in flight.
func TestIngestBoundsConcurrency(t *testing.T) {
	const hosts, conc = 40, 2
	var inflight, peak atomic.Int32
	entered := make(chan struct{}, hosts)
	release := make(chan struct{})
	store := &fakeStore{t: t}
	store.append = func(_ context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
		n := inflight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		entered <- struct{}{}
		<-release
		inflight.Add(-1)
		return hostqueue.AppendResult{Appended: len(req.Entries)}, nil
	}
	in := &hostqueue.Ingester{Store: store, Publisher: &fakePublisher{}, Now: func() time.Time { return testNow }, Concurrency: conc}
	var msgs []urlmsg.Message
	for i := range hosts {
		h := fmt.Sprintf("h%d.example", i)
		msgs = append(msgs, msg(h, h, "http://"+h+"/"))
	}
	done := make(chan hostqueue.IngestResult)
	go func() {
		done <- in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 10}, msgs)
	}()
	waiting := 0
	for released := 0; released < hosts; {
		if waiting < conc && waiting < hosts-released {
			<-entered
			waiting++
			continue
		}
		for range 100 {
			runtime.Gosched()
		}
		release <- struct{}{}
		waiting--
		released++
	}
	res := <-done
	if res.Appended != hosts || len(store.byKey()) != hosts {
		t.Errorf("appended %d over %d hosts, want %d over %d", res.Appended, len(store.byKey()), hosts, hosts)
	}
	if p := peak.Load(); p > conc {
		t.Errorf("%d appends ran at once, want at most Concurrency %d", p, conc)
	}
}

func TestDropped(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("Y", -7200))
	tests := []struct {
		name     string
		key      string
		entry    hostqueue.Entry
		wantHost string
	}{
		{"host from url", "example.com", hostqueue.Entry{ID: "1", URL: "http://www.example.com/a"}, "www.example.com"},
		{"port kept", "example.com:8080", hostqueue.Entry{ID: "2", URL: "http://a.example.com:8080/"}, "a.example.com:8080"},
		{"IPv6 host", "[::1]:8080", hostqueue.Entry{ID: "3", URL: "http://[::1]:8080/"}, "[::1]:8080"},
		{"unparsable url falls back to key", "example.com", hostqueue.Entry{ID: "4", URL: "%zz"}, "example.com"},
		{"url without host falls back to key", "example.com", hostqueue.Entry{ID: "5", URL: "/relative"}, "example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := hostqueue.Dropped(tt.key, []hostqueue.Entry{tt.entry}, now, 7)
			if len(rs) != 1 {
				t.Fatalf("%d results, want 1", len(rs))
			}
			r := rs[0]
			if r.ID != tt.entry.ID || r.URL != tt.entry.URL || r.Host != tt.wantHost || r.Status != result.StatusDropped {
				t.Errorf("result %+v, want id %s url %s host %s status dropped", r, tt.entry.ID, tt.entry.URL, tt.wantHost)
			}
			if !strings.Contains(r.Error, "PersistLimit (7)") {
				t.Errorf("error %q does not name PersistLimit (7)", r.Error)
			}
			if !r.FetchedAt.Equal(now) || r.FetchedAt.Location() != time.UTC {
				t.Errorf("FetchedAt %v, want %v in UTC", r.FetchedAt, now)
			}
		})
	}
	if rs := hostqueue.Dropped("k", nil, now, 1); len(rs) != 0 {
		t.Errorf("Dropped of nothing = %+v", rs)
	}
}

// dialGuard is the fetcher's own address policy, as the composition root
// wires it: the ingest-time check must judge exactly as the dial guard.
func dialGuard(allowPrivate bool) hostqueue.AddressGuard {
	return func(addr netip.AddrPort, ports []int) error {
		return fetch.CheckAddress(addr, fetch.Options{AllowPrivate: allowPrivate, AllowedPorts: ports})
	}
}

func validated(t *testing.T, id, raw string) urlmsg.Message {
	t.Helper()
	m, err := urlmsg.Validate(urlmsg.Input{URL: raw})
	if err != nil {
		t.Fatalf("Validate(%q): %v", raw, err)
	}
	m.ID = id
	return m
}

// TestIngestDeniesAddressesAtIngest: a URL whose host is (in any spelling)
// an address the dial guard refuses is answered at once with a denied
// result naming the address, and never queued; names and allowed
// addresses are queued as before.
func TestIngestDeniesAddressesAtIngest(t *testing.T) {
	tests := []struct {
		name         string
		url          string
		allowPrivate bool
		ports        []int
		wantDenied   string // substring of the result's error; "" means queued
	}{
		{"loopback", "http://127.0.0.1/", false, nil, "address 127.0.0.1 is loopback"},
		{"loopback in hex", "http://0x7f.1/a", false, nil, "address 127.0.0.1 is loopback"},
		{"loopback as one number with a port", "http://2130706433:8080/", false, []int{80, 8080}, "address 127.0.0.1 is loopback"},
		{"octal private address", "https://012.0.0.1/", false, nil, "address 10.0.0.1 is private"},
		{"metadata endpoint, shortened", "http://169.254.43518/latest/meta-data/", false, nil, "address 169.254.169.254 is link-local"},
		{"IPv6 loopback", "http://[::1]/", false, nil, "address ::1 is loopback"},
		{"IPv4-mapped metadata endpoint", "http://[::ffff:169.254.169.254]/", false, nil, "169.254.169.254, which is link-local"},
		{"public address on a port not allowed", "http://93.184.216.34:22/", false, nil, "port 22 of 93.184.216.34 is not allowed"},
		{"public address on the https default port not allowed", "https://93.184.216.34/", false, []int{80}, "port 443 of 93.184.216.34 is not allowed"},
		{"public address", "http://93.184.216.34/", false, nil, ""},
		{"public address in hex", "http://0x5db8d822/", false, nil, ""},
		{"public address on an allowed port", "http://93.184.216.34:8080/", false, []int{80, 443, 8080}, ""},
		{"public IPv6 address", "https://[2001:4860:4860::8888]/", false, nil, ""},
		{"name: judged when dialled", "http://localhost/", false, nil, ""},
		{"name starting with a digit", "http://127.example/", false, nil, ""},
		{"private networks allowed", "http://127.0.0.1:6379/", true, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &fakeStore{t: t}
			pub := &fakePublisher{}
			in := &hostqueue.Ingester{Store: store, Publisher: pub, Now: func() time.Time { return testNow }, Guard: dialGuard(tt.allowPrivate)}
			m := validated(t, "id1", tt.url)
			other := msg("id2", "example.com", "http://example.com/")
			res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 10, AllowedPorts: tt.ports}, []urlmsg.Message{m, other})
			if len(res.Failed) != 0 {
				t.Fatalf("Failed = %v", res.Failed)
			}
			queued := map[string]bool{}
			for _, req := range store.byKey() {
				for _, e := range req.Entries {
					queued[e.ID] = true
				}
			}
			if !queued["id2"] {
				t.Errorf("the name beside it was not queued")
			}
			if tt.wantDenied == "" {
				if !queued["id1"] || len(pub.published) != 0 || res.Denied != 0 || res.Appended != 2 {
					t.Errorf("%s: queued %v, published %+v, result %+v; want it queued and nothing published", m.URL, queued, pub.published, res)
				}
				return
			}
			if queued["id1"] {
				t.Errorf("%s was queued; want it denied at ingest", m.URL)
			}
			if res.Denied != 1 || res.Appended != 1 {
				t.Errorf("Denied %d Appended %d, want 1 and 1", res.Denied, res.Appended)
			}
			if len(pub.published) != 1 {
				t.Fatalf("published %+v, want one denied result", pub.published)
			}
			r := pub.published[0]
			if r.ID != "id1" || r.URL != m.URL || r.Host != m.Host || r.Status != result.StatusDenied || r.Attempts != 0 {
				t.Errorf("result %+v, want id1, %s, host %s, denied, no attempts", r, m.URL, m.Host)
			}
			if !strings.Contains(r.Error, tt.wantDenied) {
				t.Errorf("error %q does not contain %q", r.Error, tt.wantDenied)
			}
			if strings.Contains(r.Error, "no such host") {
				t.Errorf("error %q speaks of DNS", r.Error)
			}
			if !r.FetchedAt.Equal(testNow) || r.FetchedAt.Location() != time.UTC {
				t.Errorf("FetchedAt %v, want %v in UTC", r.FetchedAt, testNow.UTC())
			}
		})
	}
}

// TestIngestDeniedPublishFailure: when the denied results cannot be
// published, exactly those messages fail (to be retried); the rest of the
// batch is queued.
func TestIngestDeniedPublishFailure(t *testing.T) {
	boom := errors.New("sqs down")
	store := &fakeStore{t: t}
	in := &hostqueue.Ingester{Store: store, Publisher: &fakePublisher{err: boom}, Now: func() time.Time { return testNow }, Guard: dialGuard(false)}
	msgs := []urlmsg.Message{
		validated(t, "a", "http://a.example/"),
		validated(t, "lo1", "http://127.1/"),
		validated(t, "b", "http://b.example/"),
		validated(t, "lo2", "http://[::1]/"),
	}
	res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 10}, msgs)
	if got := slices.Sorted(maps.Keys(res.Failed)); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("failed %v, want [1 3] (the denied messages)", got)
	}
	for i, err := range res.Failed {
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "publish 2 denied results") {
			t.Errorf("message %d: error %v, want the publish error with context", i, err)
		}
	}
	if res.Denied != 0 || res.Appended != 2 || len(store.byKey()) != 2 {
		t.Errorf("result %+v over %d hosts, want 0 denied and the 2 names queued", res, len(store.byKey()))
	}
}

// TestIngestWithoutGuard: no guard, no ingest-time verdict; the dial guard
// judges later.
func TestIngestWithoutGuard(t *testing.T) {
	store := &fakeStore{t: t}
	pub := &fakePublisher{}
	in := &hostqueue.Ingester{Store: store, Publisher: pub, Now: func() time.Time { return testNow }}
	res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 10}, []urlmsg.Message{validated(t, "lo", "http://127.0.0.1/")})
	if res.Appended != 1 || res.Denied != 0 || len(pub.published) != 0 {
		t.Errorf("result %+v, published %+v; want it queued", res, pub.published)
	}
}

// TestIngestGuardGetsAllowedPorts: the guard sees the address, the URL's
// port (the scheme's default when it has none) and the runtime ports.
func TestIngestGuardGetsAllowedPorts(t *testing.T) {
	type call struct {
		addr  netip.AddrPort
		ports []int
	}
	var calls []call
	in := &hostqueue.Ingester{Store: &fakeStore{t: t}, Publisher: &fakePublisher{}, Now: func() time.Time { return testNow }, Concurrency: 1,
		Guard: func(addr netip.AddrPort, ports []int) error {
			calls = append(calls, call{addr, ports})
			return nil
		}}
	msgs := []urlmsg.Message{
		validated(t, "1", "http://10.0.0.1/"),
		validated(t, "2", "https://10.0.0.1/"),
		validated(t, "3", "http://[fe80::1]:8443/"),
		validated(t, "4", "http://example.com:8080/"),
	}
	in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 10, AllowedPorts: []int{80, 8443}}, msgs)
	want := []netip.AddrPort{
		netip.MustParseAddrPort("10.0.0.1:80"),
		netip.MustParseAddrPort("10.0.0.1:443"),
		netip.MustParseAddrPort("[fe80::1]:8443"),
	}
	if len(calls) != len(want) {
		t.Fatalf("guard called %d times (%+v), want %d (the names are not judged)", len(calls), calls, len(want))
	}
	for i, c := range calls {
		if c.addr != want[i] || !slices.Equal(c.ports, []int{80, 8443}) {
			t.Errorf("call %d: %v %v, want %v [80 8443]", i, c.addr, c.ports, want[i])
		}
	}
}

// TestIngestStopsAtUntil: host writes not started by Until are not made:
// their messages fail with ErrNoTime (to be sent again), the written hosts'
// messages are accepted, and no message is both or neither. The clock moves
// as the appends run.
func TestIngestStopsAtUntil(t *testing.T) {
	const hosts = 10
	var clock atomic.Int64 // seconds after testNow
	now := func() time.Time { return testNow.Add(time.Duration(clock.Load()) * time.Second) }
	store := &fakeStore{t: t}
	store.append = func(_ context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
		clock.Add(1) // each write takes a second
		return hostqueue.AppendResult{Appended: len(req.Entries)}, nil
	}
	in := &hostqueue.Ingester{Store: store, Publisher: &fakePublisher{}, Now: now, Concurrency: 1}
	var msgs []urlmsg.Message
	for i := range hosts {
		h := fmt.Sprintf("h%d.example", i)
		msgs = append(msgs, msg(h+"/a", h, "http://"+h+"/a"), msg(h+"/b", h, "http://"+h+"/b"))
	}
	res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 10, Until: testNow.Add(4 * time.Second)}, msgs)

	written := store.byKey()
	if len(written) != 4 || res.Appended != 8 {
		t.Fatalf("%d hosts written (%d urls) by Until, want the 4 started before it", len(written), res.Appended)
	}
	for i, m := range msgs {
		err, failed := res.Failed[i]
		_, wrote := written[m.Host]
		switch {
		case wrote && failed:
			t.Errorf("%s: written and failed (%v)", m.ID, err)
		case !wrote && !errors.Is(err, hostqueue.ErrNoTime):
			t.Errorf("%s: not written, error %v; want ErrNoTime", m.ID, err)
		}
	}
}

// TestIngestStopsWhenContextEnds: writes waiting for a slot when the
// context ends are not started; their messages fail with the context's
// error, and Ingest returns without waiting for them.
func TestIngestStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	store := &fakeStore{t: t}
	store.append = func(ctx context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
		cancel() // the first write outlives the context
		<-ctx.Done()
		return hostqueue.AppendResult{}, ctx.Err()
	}
	in := &hostqueue.Ingester{Store: store, Publisher: &fakePublisher{}, Now: func() time.Time { return testNow }, Concurrency: 1}
	var msgs []urlmsg.Message
	for i := range 5 {
		h := fmt.Sprintf("h%d.example", i)
		msgs = append(msgs, msg(h, h, "http://"+h+"/"))
	}
	res := in.Ingest(ctx, hostqueue.IngestParams{PersistLimit: 10}, msgs)
	if len(store.byKey()) != 1 || len(res.Failed) != len(msgs) || res.Appended != 0 {
		t.Fatalf("%d writes started, %d of %d messages failed; want one write and all failed", len(store.byKey()), len(res.Failed), len(msgs))
	}
	for i, err := range res.Failed {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("message %d: %v, want the context's error", i, err)
		}
	}
}

// batchStore is a fakeStore that takes a batch's appends in one call
// (hostqueue.BatchAppender), each answered by the fakeStore's Append.
type batchStore struct {
	*fakeStore
	batches [][]string // the keys of each AppendBatch call
}

func (s *batchStore) AppendBatch(ctx context.Context, reqs []hostqueue.AppendRequest) []hostqueue.AppendOutcome {
	keys := make([]string, len(reqs))
	out := make([]hostqueue.AppendOutcome, len(reqs))
	for i, req := range reqs {
		keys[i] = req.Key
		out[i].Result, out[i].Err = s.Append(ctx, req)
	}
	s.batches = append(s.batches, keys)
	return out
}

// TestIngestBatchAppender: a store that takes a batch's appends at once
// gets them in one call, hosts in the order first seen, and each outcome
// counts as the same append's would: held back, failed for its own host
// only, activated.
func TestIngestBatchAppender(t *testing.T) {
	store := &batchStore{fakeStore: &fakeStore{t: t}}
	store.append = func(_ context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
		switch req.Key {
		case "bad.example":
			return hostqueue.AppendResult{}, errors.New("disk on fire")
		case "full.example":
			return hostqueue.AppendResult{Appended: 1, HeldBack: len(req.Entries) - 1, Activated: true, Shard: hostqueue.VirtualShard(req.Key)}, nil
		}
		return hostqueue.AppendResult{Appended: len(req.Entries), Activated: true, Shard: hostqueue.VirtualShard(req.Key)}, nil
	}
	in := &hostqueue.Ingester{Store: store, Publisher: &fakePublisher{}, Now: func() time.Time { return testNow }, Overflow: hostqueue.HoldBack, Concurrency: 1}
	msgs := []urlmsg.Message{
		msg("f1", "full.example", "http://full.example/1"),
		msg("a1", "a.example", "http://a.example/1"),
		msg("b1", "bad.example", "http://bad.example/1"),
		msg("f2", "full.example", "http://full.example/2"),
		msg("a2", "a.example", "http://a.example/2"),
		msg("f3", "full.example", "http://full.example/3"),
	}
	res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 10}, msgs)

	if want := [][]string{{"full.example", "a.example", "bad.example"}}; !slices.EqualFunc(store.batches, want, slices.Equal) {
		t.Fatalf("batches %v, want one of every host in the order first seen %v", store.batches, want)
	}
	if res.Appended != 3 || res.HeldBack != 2 {
		t.Errorf("result %+v, want 3 appended and 2 held back", res)
	}
	if got := slices.Sorted(maps.Keys(res.Failed)); !slices.Equal(got, []int{2, 3, 5}) {
		t.Fatalf("failed %v, want bad.example's (2) and full.example's last two (3, 5)", got)
	}
	if err := res.Failed[2]; err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "bad.example") {
		t.Errorf("bad.example failed with %v, want the store's error naming the host", err)
	}
	for _, i := range []int{3, 5} {
		if !errors.Is(res.Failed[i], hostqueue.ErrQueueFull) {
			t.Errorf("message %d failed with %v, want ErrQueueFull", i, res.Failed[i])
		}
	}
	want := slices.Sorted(slices.Values([]int{hostqueue.VirtualShard("full.example"), hostqueue.VirtualShard("a.example")}))
	if !slices.Equal(res.Activated, slices.Compact(want)) {
		t.Errorf("activated %v, want the shards of the two hosts appended %v", res.Activated, want)
	}

	// Past Until, nothing is written and every message says why.
	store.batches = nil
	res = in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 10, Until: testNow}, msgs)
	if len(store.batches) != 0 || len(res.Failed) != len(msgs) {
		t.Fatalf("past Until: %d batches written, %d of %d failed; want none written and all failed", len(store.batches), len(res.Failed), len(msgs))
	}
	for i, err := range res.Failed {
		if !errors.Is(err, hostqueue.ErrNoTime) {
			t.Errorf("past Until: message %d failed with %v, want ErrNoTime", i, err)
		}
	}
}
