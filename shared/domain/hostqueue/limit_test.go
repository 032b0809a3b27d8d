package hostqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

func TestEvict(t *testing.T) {
	tests := []struct {
		name                     string
		pending, incoming, limit int
		wantPending, wantIncome  int
	}{
		{"empty queue", 0, 0, 10, 0, 0},
		{"under the limit", 3, 4, 10, 0, 0},
		{"exactly at the limit", 6, 4, 10, 0, 0},
		{"one over, oldest pending goes", 7, 4, 10, 1, 0},
		{"over by all pending", 6, 10, 10, 6, 0},
		{"incoming alone at the limit", 5, 10, 10, 5, 0},
		{"incoming alone over the limit", 5, 12, 10, 5, 2},
		{"incoming alone over, nothing pending", 0, 12, 10, 0, 2},
		{"pending already over the limit", 15, 0, 10, 5, 0},
		{"pending over and incoming", 15, 3, 10, 8, 0},
		{"limit one", 1, 1, 1, 1, 0},
		{"limit one, several incoming", 2, 3, 1, 2, 2},
		{"limit zero acts as one", 2, 3, 0, 2, 2},
		{"negative limit acts as one", 0, 1, -5, 0, 0},
		{"negative limit, two incoming", 0, 2, -5, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp, fi := hostqueue.Evict(tt.pending, tt.incoming, tt.limit)
			if fp != tt.wantPending || fi != tt.wantIncome {
				t.Fatalf("Evict(%d, %d, %d) = (%d, %d), want (%d, %d)", tt.pending, tt.incoming, tt.limit, fp, fi, tt.wantPending, tt.wantIncome)
			}
			limit := max(tt.limit, 1)
			if left := tt.pending + tt.incoming - fp - fi; left > limit && tt.pending+tt.incoming > 0 {
				t.Errorf("%d entries left, over the limit %d", left, limit)
			}
			if fi > 0 && fp != tt.pending {
				t.Errorf("evicted %d incoming while %d pending (older) stay", fi, tt.pending-fp)
			}
		})
	}
}

func TestQueueKey(t *testing.T) {
	tests := []struct {
		name     string
		host     string
		byDomain bool
		want     string
	}{
		{"host mode keeps the host", "a.b.example.co.uk", false, "a.b.example.co.uk"},
		{"host mode keeps the port", "www.example.com:8080", false, "www.example.com:8080"},
		{"host mode keeps IPv6", "[::1]:8080", false, "[::1]:8080"},
		{"domain of a deep host", "a.b.example.co.uk", true, "example.co.uk"},
		{"domain of www", "www.example.com", true, "example.com"},
		{"registrable domain itself", "example.com", true, "example.com"},
		{"port kept", "a.example.com:8080", true, "example.com:8080"},
		{"port kept on a deep host", "x.y.example.co.uk:8443", true, "example.co.uk:8443"},
		{"punycode host", "www.xn--bcher-kva.example", true, "xn--bcher-kva.example"},
		{"private suffix", "foo.bar.github.io", true, "bar.github.io"},
		{"IPv4 unchanged", "127.0.0.2", true, "127.0.0.2"},
		{"IPv4 with port unchanged", "127.0.0.2:8080", true, "127.0.0.2:8080"},
		{"IPv6 unchanged", "[::1]", true, "[::1]"},
		{"IPv6 with port unchanged", "[2001:db8::1]:8080", true, "[2001:db8::1]:8080"},
		{"localhost unchanged", "localhost", true, "localhost"},
		{"localhost with port unchanged", "localhost:3000", true, "localhost:3000"},
		{"public suffix alone unchanged", "co.uk", true, "co.uk"},
		{"single label unchanged", "intranet", true, "intranet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hostqueue.QueueKey(tt.host, tt.byDomain); got != tt.want {
				t.Errorf("QueueKey(%q, %v) = %q, want %q", tt.host, tt.byDomain, got, tt.want)
			}
		})
	}
}

func TestPlanAppend(t *testing.T) {
	ents := func(ids ...string) []hostqueue.Entry {
		var out []hostqueue.Entry
		for _, id := range ids {
			out = append(out, hostqueue.Entry{ID: id, URL: "https://example.com/" + id})
		}
		return out
	}
	ids := func(es []hostqueue.Entry) string {
		var b strings.Builder
		for _, e := range es {
			b.WriteString(e.ID)
		}
		return b.String()
	}
	tests := []struct {
		name           string
		pending        int
		req            hostqueue.AppendRequest
		head           int
		dropped, queue string
		held           int
	}{
		{"room for all", 2, hostqueue.AppendRequest{Entries: ents("a", "b"), Limit: 5}, 0, "", "ab", 0},
		{"oldest pending make room", 4, hostqueue.AppendRequest{Entries: ents("a", "b"), Limit: 5}, 1, "", "ab", 0},
		{"incoming alone too many", 3, hostqueue.AppendRequest{Entries: ents("a", "b", "c", "d"), Limit: 2}, 3, "ab", "cd", 0},
		{"hold back the newest", 3, hostqueue.AppendRequest{Entries: ents("a", "b", "c"), Limit: 4, HoldBack: true}, 0, "", "a", 2},
		{"hold back on a full queue", 5, hostqueue.AppendRequest{Entries: ents("a"), Limit: 4, HoldBack: true}, 0, "", "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := hostqueue.PlanAppend(tt.pending, tt.req)
			if p.FromHead != tt.head || ids(p.Dropped) != tt.dropped || ids(p.Queue) != tt.queue || p.HeldBack != tt.held {
				t.Fatalf("plan: head %d, dropped %q, queue %q, held %d; want %d, %q, %q, %d",
					p.FromHead, ids(p.Dropped), ids(p.Queue), p.HeldBack, tt.head, tt.dropped, tt.queue, tt.held)
			}
			r := p.Result(p.FromHead+len(p.Dropped), tt.pending-p.FromHead+len(p.Queue), false)
			if r.Appended != len(p.Queue) || r.HeldBack != tt.held || r.Pending > max(tt.req.Limit, tt.pending) {
				t.Fatalf("result %+v of plan %+v", r, p)
			}
		})
	}
}

// TestReportedOnce: a retried write evicts the same entries again plus a
// new one; only the new one is reported. A failed report records nothing,
// so the next attempt reports it again.
func TestReportedOnce(t *testing.T) {
	var got [][]string
	fail := false
	req := hostqueue.AppendRequest{Key: "example.com", OnEvict: func(_ context.Context, es []hostqueue.Entry) error {
		if fail {
			return errors.New("queue down")
		}
		var ids []string
		for _, e := range es {
			ids = append(ids, e.ID)
		}
		got = append(got, ids)
		return nil
	}}
	r := hostqueue.Reported{}
	a, b, c := hostqueue.Entry{ID: "a"}, hostqueue.Entry{ID: "b"}, hostqueue.Entry{ID: "c"}
	if err := r.Report(t.Context(), req, []hostqueue.Entry{a, b}); err != nil {
		t.Fatal(err)
	}
	fail = true
	if err := r.Report(t.Context(), req, []hostqueue.Entry{a, b, c}); err == nil || !strings.Contains(err.Error(), "report 1 evicted urls of example.com") {
		t.Fatalf("failed report: %v, want an error naming 1 url and the host", err)
	}
	fail = false
	if err := r.Report(t.Context(), req, []hostqueue.Entry{a, b, c}); err != nil {
		t.Fatal(err)
	}
	if err := r.Report(t.Context(), req, []hostqueue.Entry{a, b, c}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[[a b] [c]]" {
		t.Fatalf("reported %v, want [[a b] [c]]", got)
	}
	if fresh := hostqueue.Reported(nil).Fresh([]hostqueue.Entry{a}); len(fresh) != 1 {
		t.Fatalf("nil Reported: fresh %v, want a", fresh)
	}
}
