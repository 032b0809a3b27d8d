package ingesthandler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// memStore is a hostqueue.Appender that records appends.
type memStore struct {
	mu     sync.Mutex
	queued map[string]string // id -> url
}

func (s *memStore) Append(_ context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range req.Entries {
		s.queued[e.ID] = e.URL
	}
	return hostqueue.AppendResult{Appended: len(req.Entries), Pending: len(req.Entries)}, nil
}

type recordingPublisher struct {
	mu  sync.Mutex
	got map[string]result.Result // by id
}

func (p *recordingPublisher) Publish(_ context.Context, rs []result.Result) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range rs {
		p.got[r.ID] = r
	}
	return nil
}

// guarded is the real Ingester with the fetcher's address policy, wired as
// wiring.New wires it for a deployment that does not allow private
// networks, behind the handler.
type guarded struct {
	h     *ingesthandler.Handler
	store *memStore
	pub   *recordingPublisher
}

func newGuarded(ports string) guarded {
	g := guarded{store: &memStore{queued: map[string]string{}}, pub: &recordingPublisher{got: map[string]result.Result{}}}
	ing := &hostqueue.Ingester{
		Store: g.store, Publisher: g.pub,
		Now: func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) },
		Guard: func(addr netip.AddrPort, allowed []int) error {
			return fetch.CheckAddress(addr, fetch.Options{AllowedPorts: allowed})
		},
	}
	g.h = newHandler(ing, nil)
	g.h.Params = func(context.Context) params.Params {
		p := testParams()
		p.AllowedPorts = ports
		return p
	}
	return g
}

// The items of testdata/apigw-post-addresses.json, by index, and what the
// address guard makes of them with the default ports.
var addressItems = []struct {
	url        string // normalised
	wantDenied string // substring of the denied result's error; "" means queued
}{
	{"http://127.0.0.1/admin", "address 127.0.0.1 is loopback"},
	{"http://169.254.169.254/latest/meta-data/", "address 169.254.169.254 is link-local"},
	{"http://example.com/ok", ""},
	{"http://93.184.216.34:22/", "port 22 of 93.184.216.34 is not allowed"},
	{"http://[::1]:8080/", "address ::1 is loopback"},
	{"http://93.184.216.34/page", ""},
	// index 6, http://1.2.3.09/, is not a URL at all: an item error.
}

// TestAPIDeniesAddressesAtIngest: POST /urls with hosts that are addresses
// the deployment may not reach (in numeric shorthand too) accepts them,
// with IDs, and answers each with a denied result naming the address on
// the output queue; none is queued, and every accepted ID ends in a queue
// entry or a result.
func TestAPIDeniesAddressesAtIngest(t *testing.T) {
	g := newGuarded("80,443")
	ev := apiRequestFile(t, "apigw-post-addresses.json")
	resp, err := g.h.HandleAPI(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202: %s", resp.StatusCode, resp.Body)
	}
	body := decodeAPI(t, resp)
	if body.Accepted != 6 || body.Denied != 4 || len(body.IDs) != 6 {
		t.Errorf("accepted %d denied %d ids %d, want 6, 4, 6", body.Accepted, body.Denied, len(body.IDs))
	}
	if len(body.Errors) != 1 || body.Errors[0].Index != 6 || !strings.Contains(body.Errors[0].Error, "not a valid IPv4 address") {
		t.Errorf("errors %+v, want item 6 refused as an invalid IPv4 address", body.Errors)
	}
	for i, id := range body.IDs {
		it := addressItems[i]
		queuedURL, queued := g.store.queued[id]
		r, published := g.pub.got[id]
		switch {
		case it.wantDenied == "":
			if !queued || queuedURL != it.url || published {
				t.Errorf("%s: queued %v (%s), published %v; want it queued", it.url, queued, queuedURL, published)
			}
		case queued:
			t.Errorf("%s was queued; want it denied at ingest", it.url)
		case !published:
			t.Errorf("%s: accepted id %s has neither a queue entry nor a result", it.url, id)
		default:
			if r.Status != result.StatusDenied || r.URL != it.url || !strings.Contains(r.Error, it.wantDenied) {
				t.Errorf("%s: result %s %s %q, want denied with %q", it.url, r.Status, r.URL, r.Error, it.wantDenied)
			}
			if strings.Contains(r.Error, "no such host") {
				t.Errorf("%s: error %q speaks of DNS", it.url, r.Error)
			}
		}
	}
}

// TestSQSDeniesAddressesAtIngest: the same payload from the input queue.
// A denied URL is not a failed record (its result is out; a retry would
// only repeat it), and the runtime AllowedPorts decide the port rule.
func TestSQSDeniesAddressesAtIngest(t *testing.T) {
	var payload struct {
		Body string `json:"body"`
	}
	if err := json.Unmarshal(readFile(t, "apigw-post-addresses.json"), &payload); err != nil {
		t.Fatal(err)
	}
	// The invalid last item would fail the whole record: leave it out.
	var urls []string
	if err := json.Unmarshal([]byte(payload.Body), &urls); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(urls[:len(addressItems)])
	tests := []struct {
		name       string
		ports      string
		wantDenied int
	}{
		{"default ports", "80,443", 4},
		{"port 22 allowed", "80,443,22", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGuarded(tt.ports)
			resp, err := g.h.HandleSQS(context.Background(), sqsEvent(string(body)))
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("HandleSQS: %v, failures %+v; want the record to succeed", err, resp.BatchItemFailures)
			}
			if len(g.pub.got) != tt.wantDenied || len(g.store.queued) != len(addressItems)-tt.wantDenied {
				t.Errorf("published %d, queued %d; want %d denied and the rest queued", len(g.pub.got), len(g.store.queued), tt.wantDenied)
			}
			var queued []string
			for _, u := range g.store.queued {
				queued = append(queued, u)
			}
			if tt.wantDenied == 3 && !slices.Contains(queued, "http://93.184.216.34:22/") {
				t.Errorf("with port 22 allowed, queued %v lacks http://93.184.216.34:22/", queued)
			}
		})
	}
}

func apiRequestFile(t *testing.T, name string) events.APIGatewayProxyRequest {
	t.Helper()
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(readFile(t, name), &ev); err != nil {
		t.Fatalf("decode testdata/%s: %v", name, err)
	}
	return ev
}
