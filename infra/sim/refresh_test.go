package main

import (
	"strings"
	"testing"
)

// TestRefreshHourlyUnderTarget: keeping a million URLs refreshed hourly
// costs less than refreshTargetPerMillion a million refreshes all-in in
// the costliest shape (one refresh a session), and sessions that fetch
// several of a host's refreshes together cost less a refresh.
func TestRefreshHourlyUnderTarget(t *testing.T) {
	ms := RefreshModels()
	one, ten := PriceRefresh(ms[0]), PriceRefresh(ms[1])
	if one.All <= 0 || one.All > refreshTargetPerMillion {
		t.Errorf("one refresh a session: $%.2f a million refreshes, want above 0 and at most the target $%.2f", one.All, refreshTargetPerMillion)
	}
	if ten.All >= one.All || ten.WriteUnits >= one.WriteUnits {
		t.Errorf("ten a session: $%.2f (%.2f write units), want below one a session's $%.2f (%.2f)", ten.All, ten.WriteUnits, one.All, one.WriteUnits)
	}
	// The refetch's transaction: the host item and a refresh item's
	// delete and put, each at twice a plain write's units.
	if one.WriteUnits < 6 {
		t.Errorf("%.2f write units a refresh: fewer than its transaction's 6", one.WriteUnits)
	}
	if table := RefreshTable([]RefreshCost{one, ten}); !strings.Contains(table, "per million refreshes") {
		t.Errorf("report without its column:\n%s", table)
	}
}
