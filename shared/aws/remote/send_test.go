package remote

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

func openList(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestSendGroupsPacksAndBatches(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	client := sqs.NewFromConfig(cfg)
	rec := &recordingSQS{Client: client}
	path, urls := writeList(t, 3000, 12)
	const msgBytes, window = 8 << 10, 64 << 10
	rep, err := Send(t.Context(), SendOptions{
		SQS: rec, QueueURL: st.InputQueueURL, List: openList(t, path), Progress: path + ".progress",
		WindowBytes: window, MessageBytes: msgBytes, Retry: fastRetry,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Done || rep.URLs != 3000 || rep.Lines != 3002 || rep.Rejected != 0 {
		t.Fatalf("report %+v, want 3000 URLs of 3002 lines, done", rep)
	}
	limit, err := queueLimit(t.Context(), rec, st.InputQueueURL)
	if err != nil {
		t.Fatal(err)
	}
	for i, call := range rec.calls {
		size := 0
		for _, b := range call {
			size += len(b)
		}
		if len(call) > 10 || size > limit {
			t.Fatalf("call %d: %d entries, %d bytes (queue limit %d)", i, len(call), size, limit)
		}
	}
	bodies := drain(t, client, st.InputQueueURL)
	if n := int64(len(bodies)); n < rep.Messages || n > rep.Messages+int64(len(rec.ambiguous)) {
		t.Fatalf("%d messages on the queue, report says %d (%d sent ambiguously)", len(bodies), rep.Messages, len(rec.ambiguous))
	}
	pairs := 0 // (message, host) pairs: 12 per message if hosts were not grouped
	for _, b := range bodies {
		if len(b) > msgBytes {
			t.Fatalf("message of %d bytes, limit %d", len(b), msgBytes)
		}
		good, _, _ := urlmsg.Parse("m", []byte(b))
		hosts := map[string]bool{}
		for _, g := range good {
			hosts[g.Host] = true
		}
		pairs += len(hosts)
	}
	windows := 200_000/window + 2 // the list is about 190 KB
	if pairs > len(bodies)+12*windows {
		t.Errorf("%d (message, host) pairs in %d messages: hosts are not grouped", pairs, len(bodies))
	}
	exactlyOnce(t, urlsOf(t, bodies), urls, rec.mayRepeat(t))
	if len(rec.calls) >= len(bodies) {
		t.Errorf("%d calls for %d messages: not batched", len(rec.calls), len(bodies))
	}
}

// TestSendResumesWithoutRepeatingOrSkipping stops a send in the middle of
// a window (after its third batch), then in the middle of a batch's
// retries, and runs it again each time: every URL is on the queue once.
func TestSendResumesWithoutRepeatingOrSkipping(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	client := sqs.NewFromConfig(cfg)
	path, urls := writeList(t, 3000, 5)
	progress := path + ".progress"
	// About 32 messages per window: four calls.
	opts := func(api SendAPI) SendOptions {
		return SendOptions{SQS: api, QueueURL: st.InputQueueURL, List: openList(t, path), Progress: progress,
			WindowBytes: 128 << 10, MessageBytes: 4 << 10, Retry: fastRetry}
	}

	// Run 1: Ctrl-C after the second call.
	ctx, cancel := context.WithCancel(t.Context())
	rec := &recordingSQS{Client: client, after: func(call int) {
		if call == 1 {
			cancel()
		}
	}}
	rep1, err := Send(ctx, opts(rec))
	if !errors.Is(err, context.Canceled) || rep1.Done {
		t.Fatalf("first run: %+v, %v; want it stopped", rep1, err)
	}
	p, err := loadProgress(progress)
	if err != nil || p.Window == nil || len(p.Window.Sent) == 0 {
		t.Fatalf("progress after the stop: %+v %v; want a window partly sent", p, err)
	}

	// Run 2: every entry of its second call fails until the run stops in
	// the retries' wait.
	ctx2, cancel2 := context.WithCancel(t.Context())
	rec2 := &recordingSQS{Client: client,
		fail: func(call, entry int) (bool, bool) { return call >= 1 && entry%2 == 0, false },
		after: func(call int) {
			if call == 3 {
				cancel2()
			}
		}}
	rep2, err := Send(ctx2, opts(rec2))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("second run: %+v, %v; want it stopped", rep2, err)
	}

	// Run 3 to the end, with passing failures.
	rec3 := &recordingSQS{Client: client, fail: func(call, entry int) (bool, bool) { return call%3 == 0 && entry == 1, false }}
	rep3, err := Send(t.Context(), opts(rec3))
	if err != nil || !rep3.Done {
		t.Fatalf("third run: %+v, %v", rep3, err)
	}
	if rep1.URLs == 0 || rep2.URLs == 0 || rep3.URLs >= 3000 {
		t.Errorf("runs sent %d, %d, %d URLs: want each to send a part", rep1.URLs, rep2.URLs, rep3.URLs)
	}
	if got := rep1.URLs + rep2.URLs + rep3.URLs; got != 3000 {
		t.Errorf("runs sent %d + %d + %d URLs, want 3000 in all", rep1.URLs, rep2.URLs, rep3.URLs)
	}
	exactlyOnce(t, urlsOf(t, drain(t, client, st.InputQueueURL)), urls, rec.mayRepeat(t), rec2.mayRepeat(t), rec3.mayRepeat(t))

	// Run 4: nothing left.
	rep4, err := Send(t.Context(), opts(&recordingSQS{Client: client}))
	if err != nil || rep4.URLs != 0 || !rep4.Done || rep4.Skipped != 3002 {
		t.Fatalf("fourth run: %+v, %v; want nothing sent, 3002 lines skipped", rep4, err)
	}
}

func TestSendRefusals(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	client := sqs.NewFromConfig(cfg)

	t.Run("bad lines named, the rest sent", func(t *testing.T) {
		path := t.TempDir() + "/l.txt"
		os.WriteFile(path, []byte("http://a.example/1\nftp://a.example/2\n{\"url\": \"http://b.example/3\", \"color\": 1}\nhttp://b.example/4\n"), 0o644)
		var rejected []Rejected
		rec := &recordingSQS{Client: client}
		rep, err := Send(t.Context(), SendOptions{SQS: rec, QueueURL: st.InputQueueURL, List: openList(t, path),
			OnReject: func(r Rejected) { rejected = append(rejected, r) }, Retry: fastRetry})
		if err != nil || rep.URLs != 2 || rep.Rejected != 2 {
			t.Fatalf("%+v, %v; want 2 URLs sent, 2 lines refused", rep, err)
		}
		if len(rejected) != 2 || rejected[0].Line != 2 || rejected[1].Line != 3 || !strings.Contains(rejected[0].Error, "scheme") {
			t.Fatalf("rejected %+v, want lines 2 and 3", rejected)
		}
		exactlyOnce(t, urlsOf(t, drain(t, client, st.InputQueueURL)), []string{"http://a.example/1", "http://b.example/4"}, rec.mayRepeat(t))
	})

	t.Run("a message the queue refuses ends the run naming its lines", func(t *testing.T) {
		path, _ := writeList(t, 50, 2)
		rec := &recordingSQS{Client: client, fail: func(call, entry int) (bool, bool) { return entry == 0, true }}
		_, err := Send(t.Context(), SendOptions{SQS: rec, QueueURL: st.InputQueueURL, List: openList(t, path),
			Progress: path + ".p", MessageBytes: 4 << 10, Retry: fastRetry})
		if err == nil || !strings.Contains(err.Error(), "refused the message of lines") {
			t.Fatalf("err = %v, want the refused message's lines", err)
		}
		drain(t, client, st.InputQueueURL)
	})

	t.Run("failures that do not pass give up after the attempts", func(t *testing.T) {
		path, _ := writeList(t, 20, 2)
		rec := &recordingSQS{Client: client, fail: func(call, entry int) (bool, bool) { return true, false }}
		_, err := Send(t.Context(), SendOptions{SQS: rec, QueueURL: st.InputQueueURL, List: openList(t, path), Retry: fastRetry})
		if err == nil || !strings.Contains(err.Error(), "not accepted after 8 attempts") || len(rec.calls) != 8 {
			t.Fatalf("err = %v after %d calls, want to give up after 8", err, len(rec.calls))
		}
	})

	t.Run("a changed list is refused", func(t *testing.T) {
		path, _ := writeList(t, 400, 3)
		ctx, cancel := context.WithCancel(t.Context())
		rec := &recordingSQS{Client: client, after: func(int) { cancel() }}
		o := SendOptions{SQS: rec, QueueURL: st.InputQueueURL, List: openList(t, path), Progress: path + ".p",
			WindowBytes: 4 << 10, MessageBytes: 4 << 10, Retry: fastRetry}
		if _, err := Send(ctx, o); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		os.WriteFile(path, append([]byte("http://new.example/\n"), b...), 0o644)
		o.List, o.SQS = openList(t, path), client
		if _, err := Send(t.Context(), o); !errors.Is(err, ErrInputChanged) {
			t.Fatalf("err = %v, want ErrInputChanged", err)
		}
		o.List, o.QueueURL = openList(t, path), st.OutputQueueURL
		if _, err := Send(t.Context(), o); err == nil || !strings.Contains(err.Error(), "records a send to "+st.InputQueueURL) {
			t.Fatalf("err = %v, want the other queue refused", err)
		}
		drain(t, client, st.InputQueueURL)
	})

	t.Run("a missing queue is an error", func(t *testing.T) {
		_, err := Send(t.Context(), SendOptions{SQS: client, QueueURL: st.InputQueueURL + "-absent", List: strings.NewReader("http://a.example/\n")})
		if err == nil || !strings.Contains(err.Error(), "-absent") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSendResumesAfterWholeWindows(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	client := sqs.NewFromConfig(cfg)
	path, urls := writeList(t, 1000, 4)
	o := SendOptions{QueueURL: st.InputQueueURL, Progress: path + ".progress", WindowBytes: 8 << 10, MessageBytes: 4 << 10, Retry: fastRetry}
	ctx, cancel := context.WithCancel(t.Context())
	rec1 := &recordingSQS{Client: client, after: func(call int) {
		if call == 3 {
			cancel()
		}
	}}
	o.SQS, o.List = rec1, openList(t, path)
	rep1, err := Send(ctx, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %+v, %v", rep1, err)
	}
	rec2 := &recordingSQS{Client: client}
	o.SQS, o.List = rec2, openList(t, path)
	rep2, err := Send(t.Context(), o)
	if err != nil || !rep2.Done || rep2.Skipped == 0 || rep2.Skipped+rep2.Lines != 1002 {
		t.Fatalf("second run: %+v, %v; want it to skip the windows sent and read the rest", rep2, err)
	}
	// The batch in flight when the first run was cancelled may have landed
	// unrecorded, and is sent again (at least once): at most one window's
	// URLs twice, none missing, none three times. A batch the SDK sent
	// more than once (a reply lost to a reset connection) may repeat too,
	// as on SQS, and does not count against the window.
	seen := urlsOf(t, drain(t, client, st.InputQueueURL))
	ambiguous1, ambiguous2 := rec1.mayRepeat(t), rec2.mayRepeat(t)
	twice := 0
	for _, u := range urls {
		switch n := seen[u]; {
		case n == 2 && ambiguous1[u]+ambiguous2[u] > 0:
		case n == 2:
			twice++
		case n != 1:
			t.Fatalf("%s on the queue %d times, want once (twice if in flight at the cancel)", u, n)
		}
	}
	if len(seen) != len(urls) || twice > 100 {
		t.Fatalf("%d distinct URLs on the queue (want %d), %d twice (want at most a window's)", len(seen), len(urls), twice)
	}
}

func TestSendRefusesAnUnwritableProgressBeforeSending(t *testing.T) {
	t.Parallel()
	rec := &recordingSQS{}
	_, err := Send(t.Context(), SendOptions{SQS: limitOnly{rec}, QueueURL: "http://127.0.0.1:1/q", List: strings.NewReader("http://a.example/\n"),
		Progress: "/nonexistent-dir/p.json"})
	if err == nil || !strings.Contains(err.Error(), "write progress") || len(rec.calls) != 0 {
		t.Fatalf("err = %v after %d calls, want the progress refused before any send", err, len(rec.calls))
	}
}

// limitOnly answers GetQueueAttributes itself, for tests that must fail
// before any queue is reached.
type limitOnly struct{ *recordingSQS }

func (limitOnly) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"MaximumMessageSize": "262144"}}, nil
}

func TestSendSendsLinesAppendedSinceTheLastRun(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	client := sqs.NewFromConfig(cfg)
	path, urls := writeList(t, 100, 3)
	rec := &recordingSQS{Client: client}
	o := SendOptions{SQS: rec, QueueURL: st.InputQueueURL, Progress: path + ".p", Retry: fastRetry}
	o.List = openList(t, path)
	if rep, err := Send(t.Context(), o); err != nil || rep.URLs != 100 {
		t.Fatalf("%+v, %v", rep, err)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("http://late.example/1\nhttp://late.example/2") // no final newline
	f.Close()
	o.List = openList(t, path)
	rep, err := Send(t.Context(), o)
	if err != nil || rep.URLs != 2 || rep.Skipped != 102 || !rep.Done {
		t.Fatalf("%+v, %v; want the two appended URLs only", rep, err)
	}
	exactlyOnce(t, urlsOf(t, drain(t, client, st.InputQueueURL)), append(urls, "http://late.example/1", "http://late.example/2"), rec.mayRepeat(t))
}
