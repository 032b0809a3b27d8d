package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// TestDuplicatesCostOneRequest: in local mode, 300 copies of one URL cost
// at most 2 requests (robots.txt aside) and each line gets its own result
// with that fetch; the summary's politeness bound counts that one fetch;
// the rules come from a --host-rules file.
func TestDuplicatesCostOneRequest(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "page %s\n", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	var lines []string
	for range 300 {
		lines = append(lines, srv.URL+"/same")
	}
	urls := filepath.Join(dir, "urls.jsonl")
	rules := filepath.Join(dir, "rules.json")
	out := filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(urls, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rules, []byte(`[{"match": "127.0.0.1", "delay": "50ms"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, "--urls", urls, "--state", filepath.Join(dir, "s.db"), "--out", out,
		"--allow-private", "--host-rules", rules)
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, stderr)
	}
	// The bound counts the one fetch, not 300 delays.
	if want := ": 1 distinct of 300 urls × "; !strings.Contains(stderr, want) {
		t.Errorf("the politeness bound does not count the copies as one fetch (want %q):\n%s", want, stderr)
	}
	mu.Lock()
	n := hits["/same"]
	mu.Unlock()
	if n < 1 || n > 2 {
		t.Errorf("/same requested %d times, want 1 or 2", n)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r result.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Status != result.StatusFetched || r.SHA256 == "" {
			t.Errorf("%s: %s sha256=%q, want fetched", r.ID, r.Status, r.SHA256)
		}
		ids[r.ID] = true
	}
	if len(ids) != 300 {
		t.Errorf("%d distinct ids in the results, want 300", len(ids))
	}
}

// TestHostRulesFileErrors: a bad rules file stops the run at once (exit 2)
// with the file, the rule and the field named.
func TestHostRulesFileErrors(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.json")
	if err := os.WriteFile(rules, []byte(`[{"match": "cdn.example.net", "connections": 40}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, "--host-rules", rules)
	if code != 2 || !strings.Contains(stderr, rules) || !strings.Contains(stderr, `rule 1 (match "cdn.example.net"): field connections=40: must be between 1 and 16`) {
		t.Errorf("exit %d, stderr %q; want 2 naming the file, rule 1 and connections", code, stderr)
	}
	code, _, stderr = runCmd(t, "--host-rules", rules, "--param", "HostRules=[]")
	if code != 2 || !strings.Contains(stderr, "give one") {
		t.Errorf("exit %d, stderr %q; want 2 refusing both", code, stderr)
	}
}
