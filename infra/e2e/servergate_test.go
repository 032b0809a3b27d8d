package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/urldownloader/urldownloader/infra/rie"
	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

const (
	// gateHosts names share one server, each with gateURLs pages.
	gateHosts = 40
	gateURLs  = 2
	// gateShards is the stack's ShardCount: invocations 0..3 own four
	// virtual shards each.
	gateShards = 4
	// serverDelay and serverConnections are the gate's parameters.
	serverDelay       = 200 * time.Millisecond
	serverConnections = 1
)

// gateServer is one loopback server that many names resolve to; it logs
// the start and end of every request, whatever the name.
type gateServer struct {
	addr netip.Addr
	port int

	mu       sync.Mutex
	reqs     []gateRequest
	inflight int
	maxIn    int
}

type gateRequest struct {
	host, path string
	start, end time.Time
}

func startGateServer(t *testing.T, ip string) *gateServer {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("serve on %s: %v", ip, err)
	}
	s := &gateServer{addr: netip.MustParseAddr(ip), port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *gateServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.mu.Lock()
	s.inflight++
	s.maxIn = max(s.maxIn, s.inflight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.reqs = append(s.reqs, gateRequest{host: r.Host, path: r.URL.Path, start: start, end: time.Now()})
		s.mu.Unlock()
	}()
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	// A response that takes a moment, so overlapping requests show.
	time.Sleep(20 * time.Millisecond)
	_, _ = w.Write([]byte("page " + r.Host + r.URL.Path))
}

// spacing is the closest two request starts and the most requests at
// once the server saw.
func (s *gateServer) spacing() (minGap time.Duration, maxIn, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	starts := make([]time.Time, len(s.reqs))
	for i, r := range s.reqs {
		starts[i] = r.start
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	minGap = time.Hour
	for i := 1; i < len(starts); i++ {
		minGap = min(minGap, starts[i].Sub(starts[i-1]))
	}
	return minGap, s.maxIn, len(s.reqs)
}

// pageRequests counts the requests of each page (host and path).
func (s *gateServer) pageRequests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, r := range s.reqs {
		if r.path != "/robots.txt" {
			out[r.host+r.path]++
		}
	}
	return out
}

// TestServerGateUnderRIE: 40 names on one loopback server, queued by the
// ingest binary and fetched by the check binary under aws-lambda-rie in
// two processes at once, each invoking every shard of 4 in turn, as
// overlapping schedules would. Names resolve through a hosts file in each
// function's mount namespace (rie.Options.Hosts), by the functions' own
// resolver.
//
// Ingest places every host in the virtual shard of the server's address,
// so the hosts are worked by one invocation at a time, whichever process
// it runs in; hashed by name they spread over every invocation, where a
// gate in one process's memory could not see the others' requests. With
// the gate, no two request starts to the server are closer
// than ServerDelay and never two are in flight.
func TestServerGateUnderRIE(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), hangLimit)
	defer cancel()
	srv := startGateServer(t, "127.0.0.66")
	hosts := map[string][]netip.Addr{}
	want := map[string]urlmsg.Message{}
	var records []events.SQSMessage
	var keys []string
	for i := range gateHosts {
		name := fmt.Sprintf("site%02d.shared.test", i)
		hosts[name] = []netip.Addr{srv.addr}
		for j := range gateURLs {
			body := fmt.Sprintf(`{"url":"http://%s:%d/page/%d"}`, name, srv.port, j)
			id := fmt.Sprintf("gate-%02d-%d", i, j)
			ms, bad, err := urlmsg.Parse(id, []byte(body))
			if err != nil || len(bad) > 0 {
				t.Fatalf("%s: %v %v", body, err, bad)
			}
			for _, m := range ms {
				want[m.ID] = m
				if j == 0 {
					keys = append(keys, m.Host)
				}
			}
			records = append(records, events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs"})
		}
	}
	// Hashed by name, the hosts fall to several invocations: a gate kept
	// in one process's memory would see only its own share.
	byName := map[int]bool{}
	for _, k := range keys {
		byName[hostqueue.VirtualShard(k)%gateShards] = true
	}
	if len(byName) < 2 {
		t.Fatalf("hashed by name the %d hosts fall to %d invocation: the test would show nothing", len(keys), len(byName))
	}
	t.Logf("hashed by name, the %d hosts fall to %d of %d check invocations", len(keys), len(byName), gateShards)

	motoSrv := startMoto(t, ctx)
	awsCfg, err := moto.AWSConfig(ctx, motoSrv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := stack.Load("")
	if err != nil {
		t.Fatal(err)
	}
	overrides := map[string]string{"FetchDelay": fetchDelay.String(), "CheckHostPeriod": "2s",
		"AllowedPorts": strconv.Itoa(srv.port), "ServerDelay": serverDelay.String(),
		"ServerConnections": strconv.Itoa(serverConnections)}
	st, err := tpl.Deploy(ctx, awsCfg, stack.Options{Prefix: stack.UniquePrefix("gate"), ShardCount: gateShards, ParamOverrides: overrides})
	if err != nil {
		t.Fatalf("deploy the stack on moto: %v", err)
	}

	ingest := startFunctionWith(t, ctx, st, "IngestFunction", bins.ingest, motoSrv.Endpoint, nil, 0, hosts)
	raw, err := json.Marshal(events.SQSEvent{Records: records})
	if err != nil {
		t.Fatal(err)
	}
	var resp events.SQSEventResponse
	invokeJSON(t, ctx, ingest, "40 hosts of one server", raw, &resp)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("ingest: batchItemFailures %+v, want none", resp.BatchItemFailures)
	}

	// Placement: one virtual shard for the server's every host.
	store := dynamo.New(dynamodb.NewFromConfig(awsCfg), st.TableName, time.Now)
	placed := map[int][]string{}
	for _, k := range keys {
		h, err := store.Load(ctx, k, 0)
		if err != nil {
			t.Fatalf("load %s: %v", k, err)
		}
		placed[h.VirtualShard] = append(placed[h.VirtualShard], k)
	}
	if len(placed) != 1 {
		t.Errorf("the server's %d hosts are in %d virtual shards, want one: %v", len(keys), len(placed), placed)
	}

	// Two check processes, each invoking every shard in turn, from
	// opposite ends, until every URL has its result.
	collector := collectResults(ctx, t, sqs.NewFromConfig(awsCfg), st.OutputQueueURL)
	env := map[string]string{"CHECK_RUN_SECONDS": checkRunSeconds}
	checks := []*rie.Emulator{
		startFunctionWith(t, ctx, st, "CheckFunction", bins.check, motoSrv.Endpoint, env, checkTimeout, hosts),
		startFunctionWith(t, ctx, st, "CheckFunction", bins.check, motoSrv.Endpoint, env, checkTimeout, hosts),
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	byShard := map[int]float64{} // requests made by each shard's invocations
	for p, check := range checks {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				shard := (i + p*gateShards/2) % gateShards
				var summary map[string]any
				invokeJSON(t, ctx, check, fmt.Sprintf("check %d shard %d", p, shard), fmt.Appendf(nil, `{"shard": %d}`, shard), &summary)
				if n, _ := summary["requests"].(float64); n > 0 {
					t.Logf("process %d, shard %d: %v requests", p, shard, n)
					mu.Lock()
					byShard[shard] += n
					mu.Unlock()
				}
			}
		})
	}
	ok := collector.waitFor(ctx, want, resultsWithin)
	close(done)
	wg.Wait()
	if !ok {
		t.Fatalf("no result for:\n%s", strings.Join(collector.missing(want), "\n"))
	}

	// Only the invocation that owns the server's virtual shard fetched.
	for vs := range placed {
		for shard, n := range byShard {
			if shard != vs%gateShards {
				t.Errorf("invocations of shard %d made %v requests; the server's hosts are in virtual shard %d, shard %d's", shard, n, vs, vs%gateShards)
			}
		}
	}

	// Every URL fetched, once.
	for id, r := range collector.snapshot() {
		if _, ok := want[id]; !ok || r.Status != "fetched" {
			t.Errorf("result %s for %s: %s %q", id, r.URL, r.Status, r.Error)
		}
	}
	seen := srv.pageRequests()
	for _, m := range want {
		path := m.URL[strings.Index(m.URL, m.Host)+len(m.Host):]
		if n := seen[m.Host+path]; n != 1 {
			t.Errorf("%s requested %d times, want once", m.URL, n)
		}
	}

	// The server's view.
	minGap, maxIn, n := srv.spacing()
	t.Logf("the server saw %d requests, the closest two starts %v apart, at most %d at once", n, minGap.Round(time.Millisecond), maxIn)
	if minGap < serverDelay {
		t.Errorf("two request starts %v apart, want at least ServerDelay %v", minGap, serverDelay)
	}
	if maxIn > serverConnections {
		t.Errorf("%d requests in flight at once, want at most ServerConnections %d", maxIn, serverConnections)
	}
}

// startFunctionWith is startFunction with names resolved from hosts
// (rie.Options.Hosts).
func startFunctionWith(t *testing.T, ctx context.Context, st *stack.Stack, id, bootstrap, endpoint string, extra map[string]string, timeout time.Duration, hosts map[string][]netip.Addr) *rie.Emulator {
	t.Helper()
	return startFunctionOpts(t, ctx, st, id, bootstrap, endpoint, extra, timeout, func(o *rie.Options) { o.Hosts = hosts })
}
