package localmode

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestListRecognisedByContent: a list read into a state, then renamed, is
// recognised by its start: nothing is read again, no URL gets a second id.
// The renamed list extended at its end goes on with its new lines only. A
// list that starts otherwise is a new one, and so is an input kept by its
// name only.
func TestListRecognisedByContent(t *testing.T) {
	site := startSite(t, demosite.Options{Hosts: 2})
	urls := site.URLs(4)
	dir := t.TempDir()
	first := writeLines(t, urls[:5])
	opts := Options{State: filepath.Join(dir, "s.db"), OutPath: filepath.Join(dir, "out.jsonl"), Addresses: fetch.PrivatePolicy(),
		Params: map[string]string{"FetchDelay": "50ms"}}
	run := func(path string) Report {
		t.Helper()
		rt := open(t, opts)
		rep, err := rt.Run(context.Background(), RunOptions{Input: fileInput(t, path)})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Close(); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := run(first); rep.Input.URLs != 5 || rep.Input.SameAs != "" {
		t.Fatalf("first run: %+v, want 5 urls read", rep.Input)
	}

	moved := filepath.Join(t.TempDir(), "renamed.txt")
	if err := os.Rename(first, moved); err != nil {
		t.Fatal(err)
	}
	rep := run(moved)
	if rep.Input.SameAs != first || rep.Input.Skipped != 5 || rep.Input.Lines != 0 || rep.Expected != 0 {
		t.Errorf("the renamed list: %+v, expected %d; want it recognised as %s, its 5 lines skipped, none read", rep.Input, rep.Expected, first)
	}

	f, err := os.OpenFile(moved, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range urls[5:7] {
		f.WriteString(u + "\n")
	}
	f.Close()
	if rep := run(moved); rep.Input.Skipped != 5 || rep.Input.URLs != 2 || rep.Results != 2 {
		t.Errorf("the list extended: %+v, %d results; want 5 skipped, 2 read and fetched", rep.Input, rep.Results)
	}

	// An input kept by its name only (a retry round) is read as itself,
	// though it starts as the list does.
	rt := open(t, opts)
	f, err = os.Open(moved)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err = rt.Run(context.Background(), RunOptions{Input: &Input{Name: "round", R: f, ByName: true}})
	if err != nil || rep.Input.SameAs != "" || rep.Input.URLs != 7 {
		t.Errorf("an input by name: %+v, %v; want its 7 urls read", rep.Input, err)
	}
	rt.Close()

	other := writeLines(t, urls[7:])
	if rep := run(other); rep.Input.SameAs != "" || rep.Input.URLs != 1 {
		t.Errorf("another list: %+v, want 1 url read as a new list", rep.Input)
	}
	results := readResults(t, opts.OutPath)
	ids := map[string]bool{}
	for _, r := range results {
		ids[r.ID] = true
	}
	if len(results) != 15 || len(ids) != 15 {
		t.Errorf("%d results, %d ids; want 15 and 15: no url of the list read twice (7 more by name)", len(results), len(ids))
	}
}
