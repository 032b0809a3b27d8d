package main

import (
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// TestFailuresSayWhy: a run that exits 1 because URLs failed says so, with
// each failed status, an example and its error; robots.txt's own denials
// and successes are not failures and add no line. (A 3,388-URL run with
// 48 URLs of unreachable hosts ended on its summary and exited 1 without
// a word why.)
func TestFailuresSayWhy(t *testing.T) {
	f := newFailures()
	for _, r := range []result.Result{
		{URL: "http://a.test/1", Status: result.StatusFetched},
		{URL: "http://a.test/private", Status: result.StatusDenied, Error: "disallowed by robots.txt for \"urldownloader\""},
		{URL: "http://b.test/1", Status: result.StatusDenied, Error: "host gave no usable answer for 15s; robots.txt could not be read"},
		{URL: "http://b.test/2", Status: result.StatusDenied, Error: "host gave no usable answer for 15s; robots.txt could not be read"},
		{URL: "http://c.test/1", Status: result.StatusFetchError, Error: "connection refused"},
	} {
		f.add(r)
	}
	if f.count() != 3 {
		t.Fatalf("counted %d failures, want 3", f.count())
	}
	var out strings.Builder
	f.print(&out)
	for _, want := range []string{
		"2 denied (e.g. http://b.test/1: host gave no usable answer",
		"1 fetch_error (e.g. http://c.test/1: connection refused)",
		"3 urls failed (exit 1)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the failure lines lack %q:\n%s", want, out.String())
		}
	}

	var none strings.Builder
	newFailures().print(&none)
	if none.Len() != 0 {
		t.Errorf("no failure printed %q", none.String())
	}
}
