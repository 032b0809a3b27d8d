package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestMergeSections: a run of some parts replaces only its sections,
// keeps the others and the header they came from, and stamps its own; a
// run of every part replaces everything, without stamps.
func TestMergeSections(t *testing.T) {
	old := splitSections("\n\nRun of OLD.\n\n### 1. Politeness\n\nold rows\n\n### 2. DynamoDB\n\nold units\n\n### Resources per invocation\n\nold resources\n\n![plot](p.png)\n\n![other](o.png)\n")
	partial := mergeSections(old, splitSections("### 1. Politeness\n\nnew rows\n\n![plot](p.png)\n"), "Run of NEW.\n\n", stampMark+" NEW_")
	if !strings.HasPrefix(partial, "Run of OLD.") || strings.Count(partial, "(p.png)") != 1 || !strings.Contains(partial, "(o.png)") {
		t.Errorf("partial merge: the old header first, the plot drawn again linked once, the other kept:\n%s", partial)
	}
	for _, want := range []string{"Run of OLD.", "new rows", "old units", "old resources", stampMark + " NEW_"} {
		if !strings.Contains(partial, want) {
			t.Errorf("partial merge lacks %q:\n%s", want, partial)
		}
	}
	for _, gone := range []string{"old rows", "Run of NEW."} {
		if strings.Contains(partial, gone) {
			t.Errorf("partial merge keeps %q:\n%s", gone, partial)
		}
	}
	if i, j := strings.Index(partial, "new rows"), strings.Index(partial, "old units"); i > j {
		t.Errorf("partial merge moved section 1 after section 2:\n%s", partial)
	}
	// Stamped again by the next partial run: one stamp, the newer.
	again := mergeSections(splitSections(partial), splitSections("### 1. Politeness\n\nnewer rows\n"), "Run of NEWER.\n\n", stampMark+" NEWER_")
	if strings.Count(again, stampMark) != 1 || !strings.Contains(again, "NEWER_") || !strings.Contains(again, "old units") {
		t.Errorf("second partial merge:\n%s", again)
	}
	full := mergeSections(old, splitSections("### 1. Politeness\n\nA\n\n### 2. DynamoDB\n\nB\n\n### Resources per invocation\n\nC\n"), "Run of NEW.\n\n", stampMark+" NEW_")
	if strings.Contains(full, "old") || strings.Contains(full, stampMark) || !strings.HasPrefix(full, "Run of NEW.") {
		t.Errorf("full merge:\n%s", full)
	}
}

func TestParseNetTable(t *testing.T) {
	text := "TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPSynRetrans\nTcpExt: 0 3 4 17\nIpExt: InNoRoutes\nIpExt: 0\n"
	m, err := parseNetTable(text, "TcpExt")
	if err != nil || m["ListenOverflows"] != 3 || m["ListenDrops"] != 4 || m["TCPSynRetrans"] != 17 {
		t.Errorf("parse: %v, %v", m, err)
	}
	if _, err := parseNetTable("TcpExt: A B\n", "TcpExt"); err == nil {
		t.Errorf("a table without values parsed")
	}
	c, err := readTCPCounters()
	if err != nil {
		t.Fatalf("read this machine's counters: %v", err)
	}
	if d := c.Sub(c); d != (TCPCounters{}) {
		t.Errorf("Sub of itself: %+v", d)
	}
}

// TestRowShape: an H takes its row's U and d, or the row of the largest H
// below it; -u and -d override every row.
func TestRowShape(t *testing.T) {
	cfg := FullConfig()
	for _, c := range []struct {
		h    int
		want RowShape
	}{
		{50, RowShape{40, 250 * time.Millisecond}},
		{1000, RowShape{40, 250 * time.Millisecond}},
		{2000, RowShape{40, 250 * time.Millisecond}},
		{5000, RowShape{20, time.Second}},
		{10000, RowShape{5, time.Second}},
		{20000, RowShape{5, time.Second}},
	} {
		if got := cfg.rowShape(c.h); got != c.want {
			t.Errorf("H=%d: %+v, want %+v", c.h, got, c.want)
		}
	}
	cfg.PerHost, cfg.RowDelay = 7, 2*time.Second
	if got := cfg.rowShape(5000); got != (RowShape{7, 2 * time.Second}) {
		t.Errorf("overridden: %+v", got)
	}
}

// TestEfficiencyPlot draws efficiency against H for rows of made-up
// figures, and the report links it.
func TestEfficiencyPlot(t *testing.T) {
	var rows []*PolitenessResult
	for i, h := range []int{200, 1000, 5000, 10000} {
		d := time.Second
		p := &PolitenessResult{Hosts: h, PerHost: 5, Delay: d, Bound: float64(h) / d.Seconds()}
		p.Local = &RunStats{System: "urldownloader, local mode", SteadyWindow: 3 * d, SteadyRate: p.Bound * (0.9 - 0.1*float64(i))}
		p.Colly = RunStats{System: "colly", SteadyWindow: 3 * d, SteadyRate: p.Bound * 0.8}
		rows = append(rows, p)
	}
	// An HTTPS row is left out; one never all busy is judged by its
	// overall rate, one without requests left out.
	rows = append(rows, &PolitenessResult{Hosts: 1000, TLS: true, Local: &RunStats{SteadyWindow: time.Second, SteadyRate: 1}, Bound: 1000})
	rows = append(rows, &PolitenessResult{Hosts: 20000, Local: &RunStats{OverallRate: 5000}, Bound: 20000})
	rows = append(rows, &PolitenessResult{Hosts: 50000, Local: &RunStats{}, Bound: 50000})
	ss := efficiencySeries(rows)
	if len(ss) != 2 || len(ss[0].hosts) != 5 || len(ss[1].hosts) != 4 || ss[0].effs[3] > 0.61 || ss[0].effs[3] < 0.59 || ss[0].effs[4] != 0.25 || !ss[0].overall[4] || ss[0].overall[3] {
		t.Fatalf("series: %+v", ss)
	}
	dir := t.TempDir()
	res := &Results{Politeness: rows, Config: Config{PlotHosts: -1}}
	out := dir + "/b.md"
	if err := res.Write(out, dir+"/b-h.png"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(efficiencyPNG(out)); err != nil || st.Size() == 0 {
		t.Fatalf("no plot: %v", err)
	}
	doc, _ := os.ReadFile(out)
	if !strings.Contains(string(doc), "(b-efficiency.png)") {
		t.Errorf("report does not link the plot:\n%s", doc)
	}
}
