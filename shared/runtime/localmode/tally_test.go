package localmode

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// TestTallyTiers runs one job's bookkeeping on the tally in memory, on the
// scratch database from its first step, and moving from one to the other
// midway: every answer must be the same, whichever tier gives it.
func TestTallyTiers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		memLimit int
		spilled  bool
	}{
		{"memory", 1 << 30, false},
		{"database", 0, true},
		{"moved midway", 6, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta, err := newTally(true)
			if err != nil {
				t.Fatal(err)
			}
			defer ta.close()
			ta.memLimit = tc.memLimit
			step := func(what string, got, want int) {
				t.Helper()
				if got != want {
					t.Fatalf("%s: got %d, want %d", what, got, want)
				}
			}
			step("first expect", ta.expect(map[string]string{"a": "http://h1/a", "b": "http://h1/b", "c": "http://h2/c", "d": "http://h2/d"}), 4)
			step("second expect (a known)", ta.expect(map[string]string{"a": "http://h1/a", "e": "http://h3/e"}), 1)
			t1, t2 := time.Unix(100, 0), time.Unix(200, 0)
			ta.accept(map[string]bool{"h1": true, "h2": true}, t1)
			ta.accept(map[string]bool{"h1": true, "h3": true}, t2)
			for host, want := range map[string]time.Time{"h1": t1, "h2": t1, "h3": t2} {
				if at, ok := ta.acceptedAt(host); !ok || !at.Equal(want) {
					t.Fatalf("accepted %s at %v (%v), want %v", host, at, ok, want)
				}
			}
			if _, ok := ta.acceptedAt("h4"); ok {
				t.Fatal("h4 was never accepted")
			}
			ta.hold([]string{"d"}, true)
			target := urlmsg.MakeID("b", 0, "http://h2/next")
			ta.seen([]result.Result{
				{ID: "a", URL: "http://h1/a", Status: result.StatusFetched},
				{ID: "a", URL: "http://h1/a", Status: result.StatusFetched},
				{ID: "x", URL: "http://h9/x", Status: result.StatusFetched},
				{ID: "b", URL: "http://h1/b", Status: result.StatusRedirect, Location: "http://h2/next"},
			})
			step("owed after the first results", ta.outstanding(), 4)
			want := []string{"c", "d", "e", target}
			slices.Sort(want)
			if got := ta.missing(10); !slices.Equal(slices.Sorted(maps.Keys(got)), want) || got["c"] != "http://h2/c" {
				t.Fatalf("missing %v, want c, d, e and the redirect's target", got)
			}
			step("missing with a limit", len(ta.missing(2)), 2)
			queued := func(ids ...string) func(func([]string) error) error {
				return func(add func([]string) error) error { return add(ids) }
			}
			n, err := ta.settle(context.Background(), queued("c"))
			if err != nil {
				t.Fatal(err)
			}
			step("settled (neither queued nor held)", n, 2)
			step("owed after settling", ta.outstanding(), 2)
			ta.seen([]result.Result{{ID: "e", URL: "http://h3/e", Status: result.StatusDenied}})
			step("owed after a result thought done elsewhere", ta.outstanding(), 2)
			ta.unholdAll()
			if n, err = ta.settle(context.Background(), queued()); err != nil {
				t.Fatal(err)
			}
			step("settled after unholding", n, 2)
			step("owed at the end", ta.outstanding(), 0)
			select {
			case <-ta.empty:
			default:
				t.Fatal("an empty tally did not signal")
			}
			if err := ta.Err(); err != nil {
				t.Fatal(err)
			}
			step("expected", ta.expected, 7)
			step("results", ta.results, 5)
			step("duplicates", ta.duplicates, 1)
			step("done elsewhere", ta.elsewhere(), 4)
			step("fetched", ta.byStatus[result.StatusFetched], 2)
			step("denied", ta.byStatus[result.StatusDenied], 1)
			if (ta.mem == nil) != tc.spilled {
				t.Fatalf("rows in memory: %v, want %v", ta.mem != nil, !tc.spilled)
			}
		})
	}
}
