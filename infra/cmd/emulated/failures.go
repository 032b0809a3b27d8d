package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/cli"
)

// failures counts the results that make the exit code 1 (cli.IsFailure)
// so that the run says why it exits 1, by status with an example, instead
// of ending on the summary alone.
type failures struct {
	mu       sync.Mutex
	byStatus map[result.Status]int
	example  map[result.Status]result.Result
	n        int
}

func newFailures() *failures {
	return &failures{byStatus: map[result.Status]int{}, example: map[result.Status]result.Result{}}
}

// add takes one result; it reports whether the result is a failure.
func (f *failures) add(r result.Result) bool {
	if !cli.IsFailure(r) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.byStatus[r.Status] == 0 {
		f.example[r.Status] = r
	}
	f.byStatus[r.Status]++
	return true
}

// count returns how many results were failures.
func (f *failures) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// print writes, when some failed, one line per status with an example
// and its error, then where to read the rest. Denials by the address
// policy are listed with their flags by cli.AddressDenials.
func (f *failures) print(w io.Writer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return
	}
	statuses := make([]string, 0, len(f.byStatus))
	for s := range f.byStatus {
		statuses = append(statuses, string(s))
	}
	sort.Strings(statuses)
	for _, s := range statuses {
		ex := f.example[result.Status(s)]
		line := fmt.Sprintf("urldownloader: %d %s (e.g. %s", f.byStatus[result.Status(s)], s, ex.URL)
		if ex.Error != "" {
			line += ": " + shorten(ex.Error, 300)
		}
		fmt.Fprintln(w, line+")")
	}
	fmt.Fprintf(w, "urldownloader: %d urls failed (exit 1): see above, and each result's error field in --out for why\n", f.n)
}

// shorten cuts s to at most n bytes, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.TrimSpace(s[:n]) + "..."
}
