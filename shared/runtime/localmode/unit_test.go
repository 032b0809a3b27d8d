package localmode

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// countingWriter counts writes and syncs, and fails from a given write on.
type countingWriter struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	writes   int
	syncs    int
	failFrom int // 0: never
	gate     chan struct{}
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.gate != nil {
		<-w.gate
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	if w.failFrom > 0 && w.writes >= w.failFrom {
		return 0, errors.New("disk full")
	}
	return w.buf.Write(p)
}

func (w *countingWriter) sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.syncs++
	return nil
}

// TestLineWriterGroupCommit: concurrent publishes each return only once
// their lines are written and synced, and share writes.
func TestLineWriterGroupCommit(t *testing.T) {
	cw := &countingWriter{gate: make(chan struct{})}
	var seen []string
	var smu sync.Mutex
	lw := newLineWriter(cw, func(rs []result.Result) {
		smu.Lock()
		defer smu.Unlock()
		for _, r := range rs {
			seen = append(seen, r.ID)
		}
	})
	lw.sync = cw.sync
	const callers = 50
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			id := string(rune('A'+i%26)) + string(rune('a'+i/26))
			if err := lw.Publish(context.Background(), []result.Result{{ID: id, Status: result.StatusFetched, Data: "<b>&</b>"}}); err != nil {
				t.Error(err)
			}
			// Returned: the line is written and synced.
			cw.mu.Lock()
			defer cw.mu.Unlock()
			if !strings.Contains(cw.buf.String(), `"id":"`+id+`"`) || cw.syncs == 0 {
				t.Errorf("publish of %s returned before its line was synced", id)
			}
		})
	}
	// Let the first write through only once every caller is queued
	// behind it, then the rest.
	for lw.queuedCount() < callers {
		runtimeGosched()
	}
	close(cw.gate)
	wg.Wait()
	lines := strings.Split(strings.TrimSpace(cw.buf.String()), "\n")
	if len(lines) != callers || len(seen) != callers {
		t.Fatalf("%d lines and %d seen, want %d", len(lines), len(seen), callers)
	}
	for _, l := range lines {
		var r result.Result
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Data != "<b>&</b>" {
			t.Errorf("line %q: %v", l, err)
		}
	}
	if cw.writes > 2 || cw.syncs != cw.writes {
		t.Errorf("%d writes and %d syncs for %d concurrent publishes, want at most 2 of each", cw.writes, cw.syncs, callers)
	}
}

// TestLineWriterFailure: a failed write fails its publish and every later
// one (the output may end in a partial line), and says so.
func TestLineWriterFailure(t *testing.T) {
	cw := &countingWriter{failFrom: 2}
	lw := newLineWriter(cw, nil)
	pub := func() error {
		return lw.Publish(context.Background(), []result.Result{{ID: "x", Status: result.StatusFetched}})
	}
	if err := pub(); err != nil {
		t.Fatal(err)
	}
	if err := pub(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("second publish: %v, want the write error", err)
	}
	if err := pub(); err == nil {
		t.Fatal("publish after a failed write succeeded")
	}
	select {
	case <-lw.Failed():
	default:
		t.Fatal("Failed not closed")
	}
	if cw.writes != 2 {
		t.Errorf("%d writes, want none after the failure", cw.writes)
	}
}

func TestReadLine(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		keep     int
		want     []string
		tooLong  []bool
	}{
		{"lf", "a\nbb\n", 10, []string{"a", "bb"}, []bool{false, false}},
		{"crlf and no final newline", "a\r\nbb", 10, []string{"a", "bb"}, []bool{false, false}},
		{"exactly keep", "abcd\r\nabcde\n", 4, []string{"abcd", "abcde"}, []bool{false, true}},
		{"longer than the reader's buffer", strings.Repeat("x", 40) + "\nok\n", 8, []string{"xxxxxxxxxx", "ok"}, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
			h := sha256.New()
			var total int64
			for i := range tc.want {
				n, text, long, err := readLine(br, h, tc.keep)
				total += n
				if err != nil && err != io.EOF {
					t.Fatal(err)
				}
				if long != tc.tooLong[i] || !long && string(text) != tc.want[i] {
					t.Errorf("line %d: %q tooLong=%v, want %q tooLong=%v", i, text, long, tc.want[i], tc.tooLong[i])
				}
			}
			if total != int64(len(tc.in)) {
				t.Errorf("consumed %d bytes of %d", total, len(tc.in))
			}
			if sum := sha256.Sum256([]byte(tc.in)); !bytes.Equal(h.Sum(nil), sum[:]) {
				t.Error("hash does not cover every byte read")
			}
		})
	}
}

func TestRecord(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		urls       int
		reject     string // substring; "" means sent or skipped
	}{
		{"bare url", "http://example.com/a", 1, ""},
		{"object", `{"url": "http://example.com/a", "etag": "\"x\""}`, 1, ""},
		{"object with an unknown field: sent, ingest refuses it", `{"url": "http://example.com/a", "note": 1}`, 1, ""},
		{"array", `["http://example.com/a", {"url": "http://example.org/"}]`, 2, ""},
		{"json string", `"http://example.com/a"`, 1, ""},
		{"comment", "# http://example.com/a", 0, ""},
		{"blank", "   ", 0, ""},
		{"bad object", `{"url": `, 0, "not a JSON object"},
		{"bad array", `["http://example.com/a"`, 0, "not a JSON array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, n, rej := record(line{text: []byte(tc.line)})
			if tc.reject != "" {
				if !strings.Contains(rej, tc.reject) || body != "" {
					t.Errorf("reject %q body %q, want a rejection naming %q", rej, body, tc.reject)
				}
				return
			}
			if rej != "" || n != tc.urls || (n > 0) != (body != "") {
				t.Errorf("body %q n=%d reject %q, want %d urls", body, n, rej, tc.urls)
			}
		})
	}
	if _, _, rej := record(line{text: []byte("x"), tooLong: true}); !strings.Contains(rej, "longer") {
		t.Errorf("too long line: %q", rej)
	}
}

// TestFeedRejects: lines the ingest handler refuses are reported once, by
// line number and reason, and never queued; their neighbours are.
func TestFeedRejects(t *testing.T) {
	rt := open(t, Options{Out: io.Discard})
	var rejected []Rejected
	rt.opts.OnReject = func(r Rejected) { rejected = append(rejected, r) }
	in := strings.Join([]string{
		"http://a.example/1",
		"ftp://a.example/2",
		`{"host": "b.example", "url": "http://c.example/"}`,
		`["http://a.example/3", "http://a.example/4"]`,
		`["http://a.example/5", "mailto:x@y"]`,
		`{"url": "http://user:pw@a.example/"}`,
		"http://a.example/6",
	}, "\n")
	rep, err := rt.feed(context.Background(), Input{Name: "t", R: strings.NewReader(in)}, make(chan struct{}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{2: "scheme", 3: "does not match", 5: "item 1", 6: "user-info"}
	if len(rejected) != len(want) {
		t.Fatalf("rejected %+v, want lines 2, 3, 5, 6", rejected)
	}
	for _, r := range rejected {
		if !strings.Contains(r.Error, want[r.Line]) {
			t.Errorf("line %d rejected for %q, want %q", r.Line, r.Error, want[r.Line])
		}
	}
	if rep.URLs != 4 || rep.Rejected != 4 || rep.Lines != 7 || !rep.EOF {
		t.Errorf("report %+v, want 4 urls from 7 lines, 4 rejected", rep)
	}
	queued, err := queuedEntries(context.Background(), rt.store)
	if err != nil {
		t.Fatal(err)
	}
	if len(queued) != 4 || rt.tally.outstanding() != 4 {
		t.Errorf("%d queued, %d owed a result; want the 4 accepted urls", len(queued), rt.tally.outstanding())
	}
}

func (lw *lineWriter) queuedCount() int {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return int(lw.queued)
}

func runtimeGosched() { runtime.Gosched() }

// TestCollectEndsWhenTheBudgetIsFull: a batch the input budget cuts short
// is handed over as soon as the reader waits for room, which only that
// batch's ingest makes, not after an idle window (here an hour) the
// stopped reader could never end: the lines are parsed as they come.
func TestCollectEndsWhenTheBudgetIsFull(t *testing.T) {
	var in strings.Builder
	for i := range 10 {
		fmt.Fprintf(&in, "http://h%d.example/\n", i)
	}
	f := &feeder{rt: &Runtime{opts: Options{IngestBatch: 100, IngestWindow: time.Hour}}, in: Input{Name: "t"}, pool: newParsePool(2, urlmsg.DefaultLimits())}
	defer f.pool.close()
	one := lineCost([]line{{text: []byte("http://h0.example/")}})
	budget := newByteBudget(3 * one)
	defer budget.close()
	lines := make(chan line, 64)
	stop := make(chan struct{})
	defer close(stop)
	go readLines(bufio.NewReader(strings.NewReader(in.String())), sha256.New(), progress{}, lines, budget, stop)
	got := make(chan []line, 1)
	go func() {
		batch, _ := f.collect(lines, budget, stop)
		got <- batch
	}()
	select {
	case batch := <-got:
		if len(batch) != 3 {
			t.Fatalf("batch of %d lines, want the 3 the budget holds", len(batch))
		}
		if ms := batch[0].parsed.msgs; len(ms) != 1 || ms[0].URL != "http://h0.example/" {
			t.Errorf("first line parsed as %+v, want one message for http://h0.example/", batch[0].parsed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("collect still waiting 10 s after the budget filled (its window is an hour)")
	}
}

// TestFeedBudgetCutBatches: a list larger than the input budget comes in
// several batches, the next read and parsed while the one before it is
// queued, and every line is queued and recorded once: the room a batch's
// ingest frees goes back as soon as it is done, not only once the next
// batch is collected (which waits for that room).
func TestFeedBudgetCutBatches(t *testing.T) {
	rt := open(t, Options{Out: io.Discard})
	one := lineCost([]line{{text: []byte("http://h00.example/page/000")}})
	rt.inputBudget = 40 * one
	var in strings.Builder
	for i := range 600 {
		fmt.Fprintf(&in, "http://h%02d.example/page/%03d\n", i%60, i)
	}
	type fed struct {
		rep InputReport
		err error
	}
	done := make(chan fed, 1)
	go func() {
		rep, err := rt.feed(context.Background(), Input{Name: "t", R: strings.NewReader(in.String())}, make(chan struct{}))
		done <- fed{rep, err}
	}()
	var got fed
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("feed still running 30 s after it was handed 600 lines")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.rep.URLs != 600 || got.rep.Lines != 600 || !got.rep.EOF {
		t.Errorf("report %+v, want 600 urls from 600 lines to the end", got.rep)
	}
	if got.rep.Batches < 600/40 {
		t.Errorf("%d ingest calls, want at least %d: the budget holds 40 lines", got.rep.Batches, 600/40)
	}
	queued, err := queuedEntries(context.Background(), rt.store)
	if err != nil {
		t.Fatal(err)
	}
	if len(queued) != 600 {
		t.Errorf("%d urls queued, want 600", len(queued))
	}
	prog, err := rt.ledger.get(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if prog.Lines != 600 || prog.URLs != 600 || prog.Offset != int64(in.Len()) {
		t.Errorf("recorded %+v, want all 600 lines (%d bytes)", prog, in.Len())
	}
}

// TestCollectParsesInOrder: lines parsed in chunks on several workers come
// back in input order, each with its own parse, across chunk boundaries.
func TestCollectParsesInOrder(t *testing.T) {
	const n = 3*parseChunkLines + 17
	var in strings.Builder
	for i := range n {
		if i%7 == 3 {
			fmt.Fprintf(&in, "ftp://h%d.example/%d\n", i%5, i)
			continue
		}
		fmt.Fprintf(&in, "http://h%d.example/%d\n", i%5, i)
	}
	f := &feeder{rt: &Runtime{opts: Options{IngestBatch: 10 * n, IngestWindow: time.Hour}}, in: Input{Name: "t"}, pool: newParsePool(4, urlmsg.DefaultLimits())}
	defer f.pool.close()
	budget := newByteBudget(inputBudget)
	defer budget.close()
	lines := make(chan line, 64)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		readLines(bufio.NewReader(strings.NewReader(in.String())), sha256.New(), progress{}, lines, budget, stop)
		close(lines)
	}()
	batch, eof := f.collect(lines, budget, stop)
	if !eof || len(batch) != n {
		t.Fatalf("batch of %d lines (end %v), want all %d", len(batch), eof, n)
	}
	for i, l := range batch {
		if l.no != int64(i+1) {
			t.Fatalf("line %d of the batch is input line %d", i, l.no)
		}
		if i%7 == 3 {
			if l.parsed.reject == "" {
				t.Errorf("line %d (%s) not refused", l.no, l.text)
			}
			continue
		}
		want := fmt.Sprintf("http://h%d.example/%d", i%5, i)
		if ms := l.parsed.msgs; len(ms) != 1 || ms[0].URL != want || ms[0].ID == "" {
			t.Errorf("line %d parsed as %+v, want one message for %s", l.no, l.parsed, want)
		}
	}
}
