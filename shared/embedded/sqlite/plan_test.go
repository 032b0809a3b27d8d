package sqlite

import (
	"strings"
	"testing"
	"time"
)

// TestQueryPlans: every statement an append, a commit, a load or a due
// query runs goes through a key or an index, so that none costs the length
// of a queue or the number of hosts (SQLite reports a full table scan as
// "SCAN <table>"; a search by key or index as "SEARCH").
func TestQueryPlans(t *testing.T) {
	s, err := NewMemory(time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cases := []struct {
		name, query string
		args        []any
		index       string // the index the plan must name, if any
	}{
		{"host by key", qHost, []any{"k"}, "key"},
		{"update host", qUpdateHost, []any{0, nil, 0, 0, 0, 0, 0, 0, "", 0, 0, 0, "", nil, nil, nil, 1}, "INTEGER PRIMARY KEY"},
		{"queue head", qHead, []any{1, 10}, "PRIMARY KEY"},
		{"queue head ids", qHeadIDs, []any{1, 0, 10}, "PRIMARY KEY"},
		{"queue head ids, first page", qFirstIDs, []any{1, 10}, "PRIMARY KEY"},
		{"evict or pop the head", qDeleteHead, []any{1, 5}, "PRIMARY KEY"},
		{"due hosts", qDueHosts, []any{3, 0, 10}, "hosts_due"},
		{"release a lease", qRelease, []any{3, "o"}, "INTEGER PRIMARY KEY"},
		{"robots", qRobots, []any{"k", "o"}, "PRIMARY KEY"},
		{"sweep hosts", qSweepHosts, []any{0, 10}, "hosts_expires"},
		{"sweep robots", qSweepRobots, []any{0, 10}, "robots_fetched"},
		{"refreshing url", qRefreshGet, []any{1, "u"}, "PRIMARY KEY"},
		{"count refreshing urls", qRefreshCount, []any{1}, "refreshes_due"},
		{"respec a refresh", qRefreshRespec, []any{1, 0, 1, "u"}, "PRIMARY KEY"},
		{"stop a refresh", qRefreshStop, []any{1, 1, "u"}, "PRIMARY KEY"},
		{"save a refetch", qRefreshSave, []any{1, 1, "", "", "", "", 1, 0, 1, "u"}, "PRIMARY KEY"},
		{"end a refresh", qRefreshDelete, []any{1, "u"}, "PRIMARY KEY"},
		{"refreshes due first", qRefreshHead, []any{1, 10}, "refreshes_due"},
		{"first refresh", qRefreshFirst, []any{1}, "refreshes_due"},
	}
	for _, c := range cases {
		var plan []string
		err := s.read(t.Context(), func(tx *txn) error {
			rows, err := s.conn.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+c.query, c.args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					return err
				}
				plan = append(plan, detail)
			}
			return rows.Err()
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		all := strings.Join(plan, "; ")
		t.Logf("%s: %s", c.name, all)
		if strings.Contains(all, "SCAN ") || !strings.Contains(all, c.index) {
			t.Errorf("%s: plan %q, want a search through %s and no scan", c.name, all, c.index)
		}
		if strings.Contains(all, "TEMP B-TREE") {
			t.Errorf("%s: plan %q sorts its results", c.name, all)
		}
	}
}
