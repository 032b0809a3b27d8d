package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"
)

// The specification's limits on one document.
const (
	// maxValues is the most values one metric may carry in a document.
	maxValues = 100
	// maxMetrics is the most metrics one directive may name.
	maxMetrics = 100
)

// maxDimValues is how many distinct values a Recorder keeps per dimension
// name; later ones are recorded as otherValue. The dimensions here hold
// closed sets far smaller (6 statuses, 16 shards): the cap only stops a
// mistake, such as a host name passed as a status, from creating a
// billed metric per value.
const maxDimValues = 32

// otherValue stands for the dimension values past maxDimValues.
const otherValue = "other"

// Recorder gathers metric values during one invocation and writes them as
// EMF documents on Flush. It is safe for concurrent use, and a nil
// *Recorder records nothing, so code can be run without one.
type Recorder struct {
	w     io.Writer
	stage string
	now   func() time.Time

	mu     sync.Mutex
	series map[seriesKey]*series
	keys   []seriesKey // in first-use order, for stable output
	seen   map[string][]string
	props  map[string]string
	fixed  map[string]string
}

// seriesKey names one combination of extra dimension and value; the zero
// key is the Stage-only series.
type seriesKey struct{ dim, value string }

type series struct {
	sums   map[string]float64
	gauges map[string]float64
	values map[string][]float64
	order  []Metric // in first-use order
}

// New returns a Recorder that writes to w (the function's stdout, where
// Lambda hands every line to CloudWatch Logs) with Stage set to stage
// ("none" when empty: a dimension value may not be empty). now stamps the
// documents (nil: time.Now). fixed are properties written on every
// document beside the metrics, such as the function's name, for log
// queries; they never become dimensions.
func New(w io.Writer, stage string, now func() time.Time, fixed map[string]string) *Recorder {
	if stage == "" {
		stage = "none"
	}
	if now == nil {
		now = time.Now
	}
	r := &Recorder{w: w, stage: stage, now: now, seen: map[string][]string{}, fixed: map[string]string{}}
	for k, v := range fixed {
		if !reserved(k) {
			r.fixed[k] = v
		}
	}
	r.reset()
	return r
}

func (r *Recorder) reset() {
	r.series = map[seriesKey]*series{}
	r.keys = nil
	r.props = map[string]string{}
}

// reserved reports names a property may not take: the metadata member,
// the dimensions and the metrics.
func reserved(name string) bool {
	if name == "_aws" || name == DimStage || name == DimStatus || name == DimShard || name == "" {
		return true
	}
	_, ok := Lookup(name)
	return ok
}

// Add records v for m (summed, kept or set, by m.Kind). NaN and infinite
// values are dropped: JSON has no form for them.
func (r *Recorder) Add(m Metric, v float64) {
	r.add(seriesKey{}, m, v)
}

// AddBy records v for m under one extra dimension, e.g. DimStatus "fetched".
// Such a Sum or Distribution is also counted in the Stage-only total (one
// document serves both); a Gauge is kept per value only, since adding up
// samples of levels means nothing.
func (r *Recorder) AddBy(m Metric, dim, value string, v float64) {
	if r == nil {
		return
	}
	if reserved(dim) && dim != DimStatus && dim != DimShard {
		// No extra dimension ("", Stage itself, or a name taken by the
		// document): the Stage-only series.
		r.Add(m, v)
		return
	}
	r.add(seriesKey{dim: dim, value: value}, m, v)
}

// AddDuration records d in m's unit (milliseconds, with a fraction).
func (r *Recorder) AddDuration(m Metric, d time.Duration) {
	r.Add(m, float64(d)/float64(time.Millisecond))
}

// SetProperty writes name=value beside the metrics of the next Flush only
// (a request id, say). Names of metrics and dimensions are ignored.
func (r *Recorder) SetProperty(name, value string) {
	if r == nil || reserved(name) {
		return
	}
	r.mu.Lock()
	r.props[name] = value
	r.mu.Unlock()
}

func (r *Recorder) add(k seriesKey, m Metric, v float64) {
	if r == nil || m.Name == "" || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if k.dim != "" {
		k.value = r.capValue(k.dim, k.value)
	}
	s := r.series[k]
	if s == nil {
		s = &series{sums: map[string]float64{}, gauges: map[string]float64{}, values: map[string][]float64{}}
		r.series[k] = s
		r.keys = append(r.keys, k)
	}
	known := false
	switch m.Kind {
	case Distribution:
		_, known = s.values[m.Name]
		s.values[m.Name] = append(s.values[m.Name], v)
	case Gauge:
		_, known = s.gauges[m.Name]
		s.gauges[m.Name] = v
	default:
		_, known = s.sums[m.Name]
		s.sums[m.Name] += v
	}
	if !known {
		s.order = append(s.order, m)
	}
}

// capValue returns value, an empty one as "none", or otherValue once the
// dimension has maxDimValues others; the caller holds r.mu.
func (r *Recorder) capValue(dim, value string) string {
	if value == "" {
		value = "none"
	}
	if len(value) > 1024 {
		value = value[:1024]
	}
	if slices.Contains(r.seen[dim], value) {
		return value
	}
	if len(r.seen[dim]) >= maxDimValues {
		return otherValue
	}
	r.seen[dim] = append(r.seen[dim], value)
	return value
}

// Flush writes what was recorded since the last Flush, one JSON document
// per line, and starts over; with nothing recorded it writes nothing.
// Call it once at the end of every invocation (a frozen Lambda instance
// may never run again, taking unflushed values with it). A write error is
// returned after the rest are tried; the values are gone either way.
func (r *Recorder) Flush() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	keys, all, props := r.keys, r.series, r.props
	r.reset()
	r.mu.Unlock()

	ts := r.now().UnixMilli()
	var errs []error
	for _, k := range keys {
		for _, doc := range r.documents(k, all[k], props, ts) {
			line, err := json.Marshal(doc)
			if err != nil {
				errs = append(errs, fmt.Errorf("encode metrics: %w", err))
				continue
			}
			line = append(line, '\n')
			if _, err := r.w.Write(line); err != nil {
				errs = append(errs, fmt.Errorf("write metrics: %w", err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("flush metrics: %w", errs[0])
	}
	return nil
}

// documents renders one series: the first document carries every sum,
// every gauge and the first maxValues values of each distribution; more
// documents carry the remaining values, maxValues at a time.
func (r *Recorder) documents(k seriesKey, s *series, props map[string]string, ts int64) []map[string]any {
	var out []map[string]any
	for chunk := 0; ; chunk++ {
		root := map[string]any{}
		var rollup, own []Metric // metrics counted in the Stage total too, and per value only
		for _, m := range s.order {
			switch m.Kind {
			case Distribution:
				vs := s.values[m.Name]
				lo := chunk * maxValues
				if lo >= len(vs) {
					continue
				}
				vs = vs[lo:min(lo+maxValues, len(vs))]
				if len(vs) == 1 {
					root[m.Name] = vs[0]
				} else {
					root[m.Name] = vs
				}
				rollup = append(rollup, m)
			case Gauge:
				if chunk > 0 {
					continue
				}
				root[m.Name] = s.gauges[m.Name]
				own = append(own, m)
			default:
				if chunk > 0 {
					continue
				}
				root[m.Name] = s.sums[m.Name]
				rollup = append(rollup, m)
			}
		}
		if len(rollup)+len(own) == 0 {
			return out
		}
		for name, v := range r.fixed {
			root[name] = v
		}
		for name, v := range props {
			root[name] = v
		}
		root[DimStage] = r.stage
		var directives []map[string]any
		if k.dim == "" {
			directives = directive(directives, [][]string{{DimStage}}, append(rollup, own...))
		} else {
			root[k.dim] = k.value
			directives = directive(directives, [][]string{{DimStage}, {DimStage, k.dim}}, rollup)
			directives = directive(directives, [][]string{{DimStage, k.dim}}, own)
		}
		root["_aws"] = map[string]any{"Timestamp": ts, "CloudWatchMetrics": directives}
		out = append(out, root)
	}
}

// directive appends the directives naming ms under dims, at most
// maxMetrics metrics each.
func directive(out []map[string]any, dims [][]string, ms []Metric) []map[string]any {
	for len(ms) > 0 {
		n := min(len(ms), maxMetrics)
		defs := make([]map[string]any, n)
		for i, m := range ms[:n] {
			defs[i] = map[string]any{"Name": m.Name, "Unit": string(m.Unit)}
		}
		out = append(out, map[string]any{"Namespace": Namespace, "Dimensions": dims, "Metrics": defs})
		ms = ms[n:]
	}
	return out
}

// Buffer is an io.Writer that keeps what a Recorder writes, for tests and
// for a local runner that reads the metrics back (Parse).
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of everything written so far.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
