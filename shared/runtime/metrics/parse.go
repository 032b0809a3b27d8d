package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// units are the units CloudWatch accepts (the MetricDatum Unit values).
var units = map[string]bool{
	"Seconds": true, "Microseconds": true, "Milliseconds": true,
	"Bytes": true, "Kilobytes": true, "Megabytes": true, "Gigabytes": true, "Terabytes": true,
	"Bits": true, "Kilobits": true, "Megabits": true, "Gigabits": true, "Terabits": true,
	"Percent": true, "Count": true,
	"Bytes/Second": true, "Kilobytes/Second": true, "Megabytes/Second": true, "Gigabytes/Second": true, "Terabytes/Second": true,
	"Bits/Second": true, "Kilobits/Second": true, "Megabits/Second": true, "Gigabits/Second": true, "Terabits/Second": true,
	"Count/Second": true, "None": true,
}

// maxDocumentBytes is CloudWatch Logs' limit on one event, which an EMF
// document is.
const maxDocumentBytes = 1 << 20

// Document is one EMF document read back.
type Document struct {
	Timestamp time.Time
	Namespace string
	// Dimensions holds the value of every dimension any directive names.
	Dimensions map[string]string
	// Values holds each metric's values, Units its unit ("" when unset).
	Values map[string][]float64
	Units  map[string]Unit
	// Sets holds, by metric, the dimension sets CloudWatch files its
	// values under (from every directive that names it).
	Sets map[string][][]string
}

// Validate checks one document against the EMF specification's required
// shape: a JSON object whose _aws member holds a Timestamp (epoch
// milliseconds) and a CloudWatchMetrics array of directives; each
// directive a Namespace, Dimensions (sets of at most 30 names, each a root
// member holding a non-empty string) and Metrics (at most 100, each a Name
// that is a root member holding a number or an array of at most 100
// numbers, with a known Unit if any and a StorageResolution of 1 or 60 if
// any). It returns the document decoded.
func Validate(line []byte) (Document, error) {
	var doc Document
	if len(line) > maxDocumentBytes {
		return doc, fmt.Errorf("document is %d bytes, over the %d a log event may hold", len(line), maxDocumentBytes)
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(line, &root); err != nil {
		return doc, fmt.Errorf("not a JSON object: %w", err)
	}
	rawMeta, ok := root["_aws"]
	if !ok {
		return doc, errors.New("no _aws member")
	}
	var meta struct {
		Timestamp         *json.Number
		CloudWatchMetrics *[]struct {
			Namespace  *string
			Dimensions *[][]string
			Metrics    *[]struct {
				Name              *string
				Unit              *string
				StorageResolution *int
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(rawMeta))
	dec.UseNumber()
	if err := dec.Decode(&meta); err != nil {
		return doc, fmt.Errorf("_aws: %w", err)
	}
	if meta.Timestamp == nil {
		return doc, errors.New("_aws.Timestamp missing")
	}
	ms, err := meta.Timestamp.Int64()
	if err != nil || ms < 0 {
		return doc, fmt.Errorf("_aws.Timestamp %s: want non-negative epoch milliseconds", meta.Timestamp)
	}
	doc.Timestamp = time.UnixMilli(ms)
	if meta.CloudWatchMetrics == nil {
		return doc, errors.New("_aws.CloudWatchMetrics missing")
	}
	doc.Dimensions, doc.Values, doc.Units, doc.Sets = map[string]string{}, map[string][]float64{}, map[string]Unit{}, map[string][][]string{}
	for i, d := range *meta.CloudWatchMetrics {
		where := fmt.Sprintf("_aws.CloudWatchMetrics[%d]", i)
		if d.Namespace == nil || len(*d.Namespace) == 0 || len(*d.Namespace) > 1024 {
			return doc, fmt.Errorf("%s.Namespace: want 1 to 1024 characters", where)
		}
		if doc.Namespace != "" && doc.Namespace != *d.Namespace {
			return doc, fmt.Errorf("%s.Namespace %q: this reader takes one namespace per document, saw %q", where, *d.Namespace, doc.Namespace)
		}
		doc.Namespace = *d.Namespace
		if d.Dimensions == nil {
			return doc, fmt.Errorf("%s.Dimensions missing", where)
		}
		for j, set := range *d.Dimensions {
			if len(set) > 30 {
				return doc, fmt.Errorf("%s.Dimensions[%d]: %d names, at most 30", where, j, len(set))
			}
			for _, name := range set {
				v, err := stringMember(root, name)
				if err != nil {
					return doc, fmt.Errorf("%s.Dimensions[%d]: dimension %q: %w", where, j, name, err)
				}
				doc.Dimensions[name] = v
			}
		}
		if d.Metrics == nil {
			return doc, fmt.Errorf("%s.Metrics missing", where)
		}
		if len(*d.Metrics) > maxMetrics {
			return doc, fmt.Errorf("%s.Metrics: %d metrics, at most %d", where, len(*d.Metrics), maxMetrics)
		}
		for j, m := range *d.Metrics {
			if m.Name == nil || len(*m.Name) == 0 || len(*m.Name) > 1024 {
				return doc, fmt.Errorf("%s.Metrics[%d].Name: want 1 to 1024 characters", where, j)
			}
			if m.Unit != nil && !units[*m.Unit] {
				return doc, fmt.Errorf("%s.Metrics[%d] %s: unit %q is not a CloudWatch unit", where, j, *m.Name, *m.Unit)
			}
			if m.StorageResolution != nil && *m.StorageResolution != 1 && *m.StorageResolution != 60 {
				return doc, fmt.Errorf("%s.Metrics[%d] %s: StorageResolution %d, want 1 or 60", where, j, *m.Name, *m.StorageResolution)
			}
			vs, err := numberMember(root, *m.Name)
			if err != nil {
				return doc, fmt.Errorf("%s.Metrics[%d]: metric %q: %w", where, j, *m.Name, err)
			}
			doc.Sets[*m.Name] = append(doc.Sets[*m.Name], *d.Dimensions...)
			if _, dup := doc.Values[*m.Name]; dup {
				continue // named by two directives (two dimension groupings): one set of values
			}
			doc.Values[*m.Name] = vs
			if m.Unit != nil {
				doc.Units[*m.Name] = Unit(*m.Unit)
			}
		}
	}
	for name := range doc.Dimensions {
		if _, clash := doc.Values[name]; clash {
			return doc, fmt.Errorf("member %q is both a dimension and a metric", name)
		}
	}
	return doc, nil
}

func stringMember(root map[string]json.RawMessage, name string) (string, error) {
	raw, ok := root[name]
	if !ok {
		return "", errors.New("no such member on the root")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("value %s is not a string", raw)
	}
	if len(s) == 0 || len(s) > 1024 {
		return "", fmt.Errorf("value %q: want 1 to 1024 characters", s)
	}
	return s, nil
}

func numberMember(root map[string]json.RawMessage, name string) ([]float64, error) {
	raw, ok := root[name]
	if !ok {
		return nil, errors.New("no such member on the root")
	}
	var one float64
	if err := json.Unmarshal(raw, &one); err == nil {
		return []float64{one}, nil
	}
	var many []float64
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("value %s is not a number or an array of numbers", raw)
	}
	if len(many) == 0 || len(many) > maxValues {
		return nil, fmt.Errorf("%d values, want 1 to %d", len(many), maxValues)
	}
	return many, nil
}

// Parse reads log output, one record per line, and returns the EMF
// documents in it: lines that are not JSON objects with an _aws member
// (the functions' other log lines) are skipped; an EMF line that breaks
// the specification is an error naming its line.
func Parse(r io.Reader) ([]Document, error) {
	var out []Document
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxDocumentBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' || !bytes.Contains(line, []byte(`"_aws"`)) {
			continue
		}
		var probe map[string]json.RawMessage
		if json.Unmarshal(line, &probe) != nil {
			continue
		}
		if _, ok := probe["_aws"]; !ok {
			continue
		}
		doc, err := Validate(line)
		if err != nil {
			return out, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, doc)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// Total is every value of one metric under one dimension value (or the
// Stage-only series, Dim ""), gathered from many documents, as CloudWatch
// would aggregate them.
type Total struct {
	Name     string
	Unit     Unit
	Dim      string
	DimValue string
	Values   []float64
}

// Sum returns the sum of the values.
func (t Total) Sum() float64 {
	s := 0.0
	for _, v := range t.Values {
		s += v
	}
	return s
}

// Max returns the largest value (0 for none).
func (t Total) Max() float64 {
	if len(t.Values) == 0 {
		return 0
	}
	return slices.Max(t.Values)
}

// Quantile returns the q-quantile (0..1) of the values, nearest rank.
func (t Total) Quantile(q float64) float64 {
	if len(t.Values) == 0 {
		return 0
	}
	vs := slices.Clone(t.Values)
	slices.Sort(vs)
	i := int(math.Ceil(q*float64(len(vs)))) - 1
	return vs[min(max(i, 0), len(vs)-1)]
}

// Totals gathers the documents' values by metric and dimension set, as
// CloudWatch files them: a value under the sets {Stage} and {Stage,
// Status} counts in the Stage-only Total and in its status's. Only sets of
// Stage and at most one other dimension are gathered (the only shapes the
// Recorder writes). Totals come in the order of All, then by dimension
// and value; metrics this package does not know follow by name.
func Totals(docs []Document) []Total {
	type key struct{ name, dim, value string }
	byKey := map[key]*Total{}
	for _, d := range docs {
		for name, vs := range d.Values {
			for _, set := range d.Sets[name] {
				k := key{name: name}
				others := 0
				for _, dim := range set {
					if dim != DimStage {
						k.dim, k.value = dim, d.Dimensions[dim]
						others++
					}
				}
				if others > 1 {
					continue
				}
				t := byKey[k]
				if t == nil {
					t = &Total{Name: name, Unit: d.Units[name], Dim: k.dim, DimValue: k.value}
					byKey[k] = t
				}
				t.Values = append(t.Values, vs...)
			}
		}
	}
	rank := map[string]int{}
	for i, m := range All() {
		rank[m.Name] = i + 1
	}
	out := make([]Total, 0, len(byKey))
	for _, t := range byKey {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		ra, rb := rank[a.Name], rank[b.Name]
		if ra == 0 {
			ra = len(rank) + 1
		}
		if rb == 0 {
			rb = len(rank) + 1
		}
		if ra != rb {
			return ra < rb
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Dim != b.Dim {
			return a.Dim < b.Dim
		}
		return strings.Compare(a.DimValue, b.DimValue) < 0
	})
	return out
}
