package metrics_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
)

var t0 = time.UnixMilli(1_760_000_000_123)

func fixedNow() time.Time { return t0 }

// lines splits a Recorder's output into its documents, each checked
// against the specification.
func lines(t *testing.T, out []byte) []metrics.Document {
	t.Helper()
	var docs []metrics.Document
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		d, err := metrics.Validate(line)
		if err != nil {
			t.Fatalf("document breaks the EMF specification: %v\n%s", err, line)
		}
		docs = append(docs, d)
	}
	return docs
}

// raw decodes one line as plain JSON, to check the exact shape written.
func raw(t *testing.T, line []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, line)
	}
	return m
}

func TestFlushWritesTheSpecifiedShape(t *testing.T) {
	var buf bytes.Buffer
	r := metrics.New(&buf, "dev", fixedNow, map[string]string{"function": "ingest"})
	r.Add(metrics.URLsAccepted, 3)
	r.Add(metrics.URLsAccepted, 4)
	r.AddDuration(metrics.FetchLatency, 1500*time.Microsecond)
	r.SetProperty("requestId", "req-1")
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	out := bytes.TrimSpace(buf.Bytes())
	if n := bytes.Count(out, []byte("\n")); n != 0 {
		t.Fatalf("%d lines, want 1:\n%s", n+1, out)
	}
	got := raw(t, out)
	want := map[string]any{
		"_aws": map[string]any{
			"Timestamp": float64(t0.UnixMilli()),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  "urldownloader",
				"Dimensions": []any{[]any{"Stage"}},
				"Metrics": []any{
					map[string]any{"Name": "URLsAccepted", "Unit": "Count"},
					map[string]any{"Name": "FetchLatency", "Unit": "Milliseconds"},
				},
			}},
		},
		"Stage":        "dev",
		"URLsAccepted": 7.0,
		"FetchLatency": 1.5,
		"function":     "ingest",
		"requestId":    "req-1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("document =\n%v\nwant\n%v", got, want)
	}
	lines(t, out)

	// The request's property was for that flush only; an empty flush
	// writes nothing.
	buf.Reset()
	if err := r.Flush(); err != nil || buf.Len() != 0 {
		t.Errorf("empty Flush wrote %q, %v", buf.String(), err)
	}
	r.Add(metrics.Requests, 1)
	r.Flush()
	if m := raw(t, bytes.TrimSpace(buf.Bytes())); m["requestId"] != nil || m["function"] != "ingest" || m["URLsAccepted"] != nil {
		t.Errorf("second flush carries %v: want function, no requestId, no earlier values", m)
	}
}

func TestStatusIsCountedPerValueAndInTheStageTotal(t *testing.T) {
	var buf bytes.Buffer
	r := metrics.New(&buf, "prod", fixedNow, nil)
	r.AddBy(metrics.Results, metrics.DimStatus, "fetched", 5)
	r.AddBy(metrics.Results, metrics.DimStatus, "denied", 2)
	r.AddBy(metrics.Results, metrics.DimStatus, "fetched", 1)
	r.Flush()
	docs := lines(t, buf.Bytes())
	if len(docs) != 2 {
		t.Fatalf("%d documents, want one per status", len(docs))
	}
	for _, d := range docs {
		if want := [][]string{{"Stage"}, {"Stage", "Status"}}; !reflect.DeepEqual(d.Sets["Results"], want) {
			t.Errorf("Results filed under %v, want %v", d.Sets["Results"], want)
		}
	}
	got := map[string]float64{}
	for _, tot := range metrics.Totals(docs) {
		got[tot.Dim+"="+tot.DimValue] = tot.Sum()
	}
	want := map[string]float64{"=": 8, "Status=fetched": 6, "Status=denied": 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("totals = %v, want %v", got, want)
	}
}

func TestGaugeKeepsTheLastValueAndIsNotRolledUp(t *testing.T) {
	var buf bytes.Buffer
	r := metrics.New(&buf, "dev", fixedNow, nil)
	r.AddBy(metrics.URLsPending, metrics.DimShard, "0", 50)
	r.AddBy(metrics.URLsPending, metrics.DimShard, "0", 40)
	r.AddBy(metrics.URLsPending, metrics.DimShard, "1", 7)
	r.Flush()
	docs := lines(t, buf.Bytes())
	got := map[string][]float64{}
	for _, tot := range metrics.Totals(docs) {
		got[tot.Dim+"="+tot.DimValue] = tot.Values
	}
	want := map[string][]float64{"Shard=0": {40}, "Shard=1": {7}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("totals = %v, want %v (no Stage-only sum of levels)", got, want)
	}
}

func TestDistributionsSplitAtOneHundredValues(t *testing.T) {
	var buf bytes.Buffer
	r := metrics.New(&buf, "dev", fixedNow, nil)
	for i := range 250 {
		r.Add(metrics.PolitenessWait, float64(i))
	}
	r.Add(metrics.HostsWorked, 3)
	r.Flush()
	docs := lines(t, buf.Bytes())
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3 (100+100+50 values)", len(docs))
	}
	for i, d := range docs {
		if n := len(d.Values["PolitenessWait"]); n > 100 {
			t.Errorf("document %d: %d values", i, n)
		}
		if _, ok := d.Values["HostsWorked"]; ok != (i == 0) {
			t.Errorf("document %d: HostsWorked present=%v; counters belong to the first only", i, ok)
		}
	}
	for _, tot := range metrics.Totals(docs) {
		switch tot.Name {
		case "PolitenessWait":
			if len(tot.Values) != 250 || tot.Sum() != 249*250/2 || tot.Quantile(0.5) != 124 || tot.Max() != 249 {
				t.Errorf("PolitenessWait: %d values, sum %v, p50 %v, max %v", len(tot.Values), tot.Sum(), tot.Quantile(0.5), tot.Max())
			}
		case "HostsWorked":
			if tot.Sum() != 3 {
				t.Errorf("HostsWorked = %v, want 3", tot.Sum())
			}
		}
	}
}

func TestDimensionValuesAreCapped(t *testing.T) {
	var buf bytes.Buffer
	r := metrics.New(&buf, "dev", fixedNow, nil)
	for i := range 40 {
		r.AddBy(metrics.Results, metrics.DimStatus, fmt.Sprintf("host-%d.example", i), 1)
	}
	r.Flush()
	values := map[string]float64{}
	for _, tot := range metrics.Totals(lines(t, buf.Bytes())) {
		if tot.Dim == metrics.DimStatus {
			values[tot.DimValue] = tot.Sum()
		}
	}
	if len(values) != 33 || values["other"] != 8 {
		t.Errorf("%d values, other=%v; want 32 kept and 8 folded into other", len(values), values["other"])
	}
}

func TestBadValuesAndNilRecorder(t *testing.T) {
	var buf bytes.Buffer
	r := metrics.New(&buf, "", fixedNow, map[string]string{"Stage": "x", "Results": "x", "_aws": "x"})
	r.Add(metrics.Requests, math.NaN())
	r.Add(metrics.Requests, math.Inf(1))
	r.Flush()
	if buf.Len() != 0 {
		t.Errorf("NaN and Inf were written: %s", buf.String())
	}
	r.Add(metrics.Requests, 1)
	r.SetProperty("Requests", "clobber")
	r.Flush()
	d := lines(t, buf.Bytes())[0]
	if d.Dimensions["Stage"] != "none" || d.Values["Requests"][0] != 1 {
		t.Errorf("document %+v: want Stage none (empty stage) and Requests 1 (reserved properties ignored)", d)
	}

	var nilRec *metrics.Recorder
	nilRec.Add(metrics.Requests, 1)
	nilRec.AddBy(metrics.Results, metrics.DimStatus, "fetched", 1)
	nilRec.SetProperty("a", "b")
	if err := nilRec.Flush(); err != nil {
		t.Error(err)
	}
}

func TestConcurrentAdds(t *testing.T) {
	buf := &metrics.Buffer{}
	r := metrics.New(buf, "dev", fixedNow, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				r.Add(metrics.Requests, 1)
				r.AddBy(metrics.Results, metrics.DimStatus, "fetched", 1)
				r.Add(metrics.FetchLatency, 2)
			}
		})
	}
	wg.Wait()
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	docs, err := metrics.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tot := range metrics.Totals(docs) {
		want := 8000.0
		if tot.Name == "FetchLatency" {
			want = 16000
		}
		if tot.Sum() != want {
			t.Errorf("%s %s=%s: sum %v, want %v", tot.Name, tot.Dim, tot.DimValue, tot.Sum(), want)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

func TestFlushReportsWriteErrors(t *testing.T) {
	r := metrics.New(failingWriter{}, "dev", fixedNow, nil)
	r.Add(metrics.Requests, 1)
	if err := r.Flush(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Flush = %v, want the write error", err)
	}
}

func TestValidateRefusesWhatTheSpecificationForbids(t *testing.T) {
	const ok = `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["Stage"]],"Metrics":[{"Name":"M","Unit":"Count"}]}]},"Stage":"dev","M":1}`
	if _, err := metrics.Validate([]byte(ok)); err != nil {
		t.Fatalf("valid document refused: %v", err)
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = "1"
	}
	dims31 := make([]string, 31)
	for i := range dims31 {
		dims31[i] = `"Stage"`
	}
	for name, doc := range map[string]string{
		"not JSON":               `{"_aws":`,
		"no _aws":                `{"Stage":"dev","M":1}`,
		"no Timestamp":           `{"_aws":{"CloudWatchMetrics":[]}}`,
		"Timestamp not a number": `{"_aws":{"Timestamp":"now","CloudWatchMetrics":[]}}`,
		"Timestamp not integral": `{"_aws":{"Timestamp":1.5,"CloudWatchMetrics":[]}}`,
		"no CloudWatchMetrics":   `{"_aws":{"Timestamp":1}}`,
		"no Namespace":           `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Dimensions":[],"Metrics":[]}]}}`,
		"empty Namespace":        `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"","Dimensions":[],"Metrics":[]}]}}`,
		"no Dimensions":          `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Metrics":[]}]}}`,
		"no Metrics":             `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[]}]}}`,
		"dimension missing":      `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["Stage"]],"Metrics":[]}]}}`,
		"dimension a number":     `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["Stage"]],"Metrics":[]}]},"Stage":3}`,
		"dimension empty":        `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["Stage"]],"Metrics":[]}]},"Stage":""}`,
		"31 dimensions":          `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[` + strings.Join(dims31, ",") + `]],"Metrics":[]}]},"Stage":"d"}`,
		"metric missing":         `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"M"}]}]}}`,
		"metric a string":        `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"M"}]}]},"M":"1"}`,
		"101 values":             `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"M"}]}]},"M":[` + strings.Join(many, ",") + `]}`,
		"no values":              `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"M"}]}]},"M":[]}`,
		"unknown unit":           `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"M","Unit":"Requests"}]}]},"M":1}`,
		"storage resolution 5":   `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"M","StorageResolution":5}]}]},"M":1}`,
		"metric without a name":  `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Unit":"Count"}]}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := metrics.Validate([]byte(doc)); err == nil {
				t.Errorf("Validate accepted %s", doc)
			}
		})
	}
}

func TestParseSkipsOtherLogLines(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString(`{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"ingested","urls":3}` + "\n")
	buf.WriteString("START RequestId: abc Version: $LATEST\n\n")
	r := metrics.New(&buf, "dev", fixedNow, nil)
	r.Add(metrics.URLsAccepted, 3)
	r.Flush()
	buf.WriteString(`{"msg":"mentions \"_aws\" in text"}` + "\n")
	docs, err := metrics.Parse(&buf)
	if err != nil || len(docs) != 1 || docs[0].Values["URLsAccepted"][0] != 3 {
		t.Fatalf("Parse = %+v, %v; want the one EMF document", docs, err)
	}
	_, err = metrics.Parse(strings.NewReader("{}\n" + `{"_aws":{"Timestamp":1}}` + "\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("Parse of a broken EMF line = %v, want an error naming line 2", err)
	}
}

func TestMetricNamesAreUniqueWithKnownUnits(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range metrics.All() {
		if m.Name == "" || seen[m.Name] {
			t.Errorf("metric %q empty or repeated", m.Name)
		}
		seen[m.Name] = true
		if got, ok := metrics.Lookup(m.Name); !ok || got != m {
			t.Errorf("Lookup(%q) = %v, %v", m.Name, got, ok)
		}
		var buf bytes.Buffer
		r := metrics.New(&buf, "dev", fixedNow, nil)
		r.Add(m, 1)
		r.Flush()
		lines(t, buf.Bytes())
	}
	if len(seen) != 17 {
		t.Errorf("%d metrics; a new one needs its place in the dashboard and docs/deploying.md", len(seen))
	}
}
