package remote

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// watchedSQS forwards to moto and checks, at every delete, that each
// message being deleted is a result already in the out file (or not a
// result at all, which must never be deleted).
type watchedSQS struct {
	*sqs.Client
	t   *testing.T
	out string

	mu      sync.Mutex
	idOf    map[string]string // receipt handle -> result id ("" for a non-result)
	deleted []string
	// failDeletes makes every delete fail once per handle.
	failDeletes bool
	failed      map[string]bool
}

func (w *watchedSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := w.Client.ReceiveMessage(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range out.Messages {
		var v struct {
			ID string `json:"id"`
		}
		json.Unmarshal([]byte(aws.ToString(m.Body)), &v)
		w.idOf[aws.ToString(m.ReceiptHandle)] = v.ID
	}
	return out, nil
}

func (w *watchedSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	written := idsIn(w.t, w.out)
	w.mu.Lock()
	fwd := *in
	fwd.Entries = nil
	var failed []sqstypes.BatchResultErrorEntry
	for _, e := range in.Entries {
		id := w.idOf[aws.ToString(e.ReceiptHandle)]
		if id == "" || written[id] == 0 {
			w.t.Errorf("deleting a message (result %q) not in the out file", id)
		}
		if w.failDeletes && !w.failed[aws.ToString(e.ReceiptHandle)] {
			w.failed[aws.ToString(e.ReceiptHandle)] = true
			failed = append(failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected")})
			continue
		}
		fwd.Entries = append(fwd.Entries, e)
		w.deleted = append(w.deleted, id)
	}
	w.mu.Unlock()
	out := &sqs.DeleteMessageBatchOutput{}
	if len(fwd.Entries) > 0 {
		var err error
		if out, err = w.Client.DeleteMessageBatch(ctx, &fwd, opts...); err != nil {
			return nil, err
		}
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

// idsIn counts the result ids in a JSON lines file.
func idsIn(t *testing.T, path string) map[string]int {
	t.Helper()
	ids := map[string]int{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ids
	}
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r result.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("out file line %q: %v", sc.Text(), err)
		}
		ids[r.ID]++
	}
	return ids
}

func readResults(t *testing.T, path string) map[string]result.Result {
	t.Helper()
	out := map[string]result.Result{}
	b, _ := os.ReadFile(path)
	for line := range bytes.Lines(b) {
		var r result.Result
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("out line %q: %v", line, err)
		}
		out[r.ID] = r
	}
	return out
}

// seedResults puts on the output queue what the check function would: an
// inline result, one whose body is in the bucket, a failure, a duplicate
// of the first, and a message that is not a result. It returns the
// stored body.
func seedResults(t *testing.T, st *stack.Stack, cfg aws.Config) []byte {
	t.Helper()
	ctx := t.Context()
	// These tests count every receive, delete and copy: the strict
	// layer's redelivery of deleted messages (SQS's at-least-once) is off
	// for this queue, so a count does not depend on its draw.
	queue := st.OutputQueueURL[strings.LastIndex(st.OutputQueueURL, "/")+1:]
	if err := moto.SetStrictQueue(ctx, aws.ToString(cfg.BaseEndpoint), queue, map[string]any{moto.KnobSQSRedeliverShare: 0}); err != nil {
		t.Fatal(err)
	}
	stored := bytes.Repeat([]byte("a large page\n"), 30_000)
	sum := sha256.Sum256(stored)
	hexSum := hex.EncodeToString(sum[:])
	if _, err := stack.NewS3(cfg).PutObject(ctx, &s3.PutObjectInput{Bucket: &st.BodyBucket, Key: aws.String(body.Key(hexSum)), Body: bytes.NewReader(stored)}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	inline := result.Result{ID: "id-inline", Host: "a.example", URL: "http://a.example/", Status: result.StatusFetched, HTTPStatus: 200, FetchedAt: now, Attempts: 1}
	inline.SetBody([]byte("<p>small & inline</p>"))
	big := result.Result{ID: "id-stored", Host: "a.example", URL: "http://a.example/big", Status: result.StatusFetched, HTTPStatus: 200, FetchedAt: now, Attempts: 1}
	big.SetStored(body.Ref{Bucket: st.BodyBucket, Key: body.Key(hexSum), Bytes: int64(len(stored)), SHA256: hexSum, ContentType: "text/plain"})
	failed := result.Result{ID: "id-failed", Host: "b.example", URL: "http://b.example/", Status: result.StatusFetchError, HTTPStatus: 503, Error: "503 after 3 attempts", FetchedAt: now, Attempts: 3}
	var bodies []string
	for _, r := range []result.Result{inline, big, failed, inline} {
		b, err := result.Encode(r, 256<<10)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, string(b))
	}
	bodies = append(bodies, "not a result")
	c := sqs.NewFromConfig(cfg)
	for i, b := range bodies {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &st.OutputQueueURL, MessageBody: aws.String(b)}); err != nil {
			t.Fatalf("seed message %d: %v", i, err)
		}
	}
	return stored
}

func queueCount(t *testing.T, c *sqs.Client, queue string) int {
	t.Helper()
	out, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: &queue,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		var k int
		fmt.Sscan(v, &k)
		n += k
	}
	return n
}

func TestReceiveWritesEachResultOnceThenDeletes(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	stored := seedResults(t, st, cfg)
	dir := t.TempDir()
	outPath := filepath.Join(dir, "results.jsonl")
	client := sqs.NewFromConfig(cfg)
	w := &watchedSQS{Client: client, t: t, out: outPath, idOf: map[string]string{}}
	var notes []string
	rep, err := Receive(t.Context(), ReceiveOptions{
		SQS: w, QueueURL: st.OutputQueueURL, Out: outPath, S3: stack.NewS3(cfg), Bucket: st.BodyBucket,
		Bodies: filepath.Join(dir, "bodies"), UntilIdle: 3 * time.Second, Retry: fastRetry,
		OnNote: func(s string) { notes = append(notes, s) },
	})
	if err != nil || !rep.Idle {
		t.Fatalf("%+v, %v", rep, err)
	}
	// SQS delivers at least once: a copy more (a message seen again after
	// a broken connection on a loaded machine) is one more duplicate
	// dropped and deleted; the out file's ids, checked below, are the
	// promise.
	if rep.Written != 3 || rep.Duplicates < 1 || rep.Deleted != 3+rep.Duplicates || rep.Bodies != 1 || rep.Left < 1 {
		t.Errorf("report %+v: want 3 written, at least 1 duplicate, each deleted, 1 body, the non-result left", rep)
	}
	ids := idsIn(t, outPath)
	if len(ids) != 3 || ids["id-inline"] != 1 || ids["id-stored"] != 1 || ids["id-failed"] != 1 {
		t.Fatalf("out file ids %v, want each of the three once", ids)
	}
	res := readResults(t, outPath)
	if res["id-inline"].Data != "<p>small & inline</p>" {
		t.Errorf("inline result's data %q", res["id-inline"].Data)
	}
	ref := res["id-stored"].Body
	if ref == nil || ref.Path == "" || ref.Bucket != "" || ref.SHA256 == "" {
		t.Fatalf("stored result's body %+v, want the file's path instead of the bucket", ref)
	}
	got, err := os.ReadFile(ref.Path)
	if err != nil || !bytes.Equal(got, stored) {
		t.Fatalf("body file: %d bytes, %v; want the stored body", len(got), err)
	}
	// The line as written is readable whole by the consumer's package.
	if data, err := (wholebody.Reader{}).ReadAll(t.Context(), res["id-stored"]); err != nil || !bytes.Equal(data, stored) {
		t.Errorf("wholebody on the written line: %v", err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "not a result") {
		t.Errorf("notes %q, want the non-result reported once", notes)
	}
	if n := queueCount(t, client, st.OutputQueueURL); n != 1 {
		t.Errorf("%d messages on the queue, want only the non-result", n)
	}
}

// TestReceiveAfterACrash: the out file holds a result whose message was not
// deleted and an incomplete line (a crash in the middle of a write): the
// result is not written again, the incomplete line is replaced by its
// result.
func TestReceiveAfterACrash(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	seedResults(t, st, cfg)
	outPath := filepath.Join(t.TempDir(), "results.jsonl")
	os.WriteFile(outPath, []byte(`{"id":"id-inline","status":"fetched"}`+"\n"+`{"id":"id-fai`), 0o644)
	client := sqs.NewFromConfig(cfg)
	w := &watchedSQS{Client: client, t: t, out: outPath, idOf: map[string]string{}, failDeletes: true, failed: map[string]bool{}}
	var notes []string
	rep, err := Receive(t.Context(), ReceiveOptions{
		SQS: w, QueueURL: st.OutputQueueURL, Out: outPath, UntilIdle: 3 * time.Second, Retry: fastRetry,
		OnNote: func(s string) { notes = append(notes, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := idsIn(t, outPath)
	if len(ids) != 3 || ids["id-inline"] != 1 || ids["id-failed"] != 1 || ids["id-stored"] != 1 {
		t.Fatalf("out file ids %v, want each once", ids)
	}
	// At least the two copies of id-inline: SQS (and the strict layer's
	// redelivery) may bring a message once more, and that copy is
	// dropped too; the out file's ids, checked above, are what counts.
	if rep.Duplicates < 2 || rep.Bodies != 0 {
		t.Errorf("report %+v: want the two copies of id-inline dropped, no body fetched", rep)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "removed an incomplete last line") {
		t.Errorf("notes %q, want the repair reported", notes)
	}
	// The stored result is written as it came: no body asked for.
	if r := readResults(t, outPath)["id-stored"]; r.Body == nil || r.Body.Path != "" {
		t.Errorf("stored result %+v", r.Body)
	}
}

func TestReceiveInlinesBodies(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	stored := seedResults(t, st, cfg)
	outPath := filepath.Join(t.TempDir(), "results.jsonl")
	rep, err := Receive(t.Context(), ReceiveOptions{
		SQS: sqs.NewFromConfig(cfg), QueueURL: st.OutputQueueURL, Out: outPath, S3: stack.NewS3(cfg),
		Inline: true, UntilIdle: 3 * time.Second, Retry: fastRetry,
	})
	if err != nil || rep.Bodies != 1 {
		t.Fatalf("%+v, %v", rep, err)
	}
	r := readResults(t, outPath)["id-stored"]
	if r.Body != nil || r.Data != string(stored) || r.Bytes != int64(len(stored)) {
		t.Fatalf("stored result inlined: body %+v, %d bytes of data", r.Body, len(r.Data))
	}
}

func TestReceiveLeavesWhatItCannotFetch(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	c := sqs.NewFromConfig(cfg)
	sum := strings.Repeat("ab", 32)
	r := result.Result{ID: "id-gone", URL: "http://a.example/", Status: result.StatusFetched, FetchedAt: time.Now()}
	r.SetStored(body.Ref{Bucket: st.BodyBucket, Key: body.Key(sum), Bytes: 10, SHA256: sum})
	local := result.Result{ID: "id-local", URL: "http://a.example/l", Status: result.StatusFetched, FetchedAt: time.Now()}
	local.SetStored(body.Ref{Path: "/etc/passwd", Bytes: 10, SHA256: sum})
	for _, m := range []result.Result{r, local} {
		b, _ := result.Encode(m, 256<<10)
		c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: &st.OutputQueueURL, MessageBody: aws.String(string(b))})
	}
	outPath := filepath.Join(t.TempDir(), "results.jsonl")
	var notes []string
	rep, err := Receive(t.Context(), ReceiveOptions{
		SQS: c, QueueURL: st.OutputQueueURL, Out: outPath, S3: stack.NewS3(cfg), Bucket: st.BodyBucket,
		Inline: true, UntilIdle: 3 * time.Second, Retry: fastRetry, OnNote: func(s string) { notes = append(notes, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := idsIn(t, outPath)
	if ids["id-gone"] != 0 || ids["id-local"] != 1 || rep.Left < 1 {
		t.Fatalf("ids %v, report %+v: want the missing body's result left on the queue, the local path written unread", ids, rep)
	}
	if got := readResults(t, outPath)["id-local"]; got.Data != "" {
		t.Fatalf("a local file was read into the results: %q", got.Data)
	}
	if n := queueCount(t, c, st.OutputQueueURL); n != 1 {
		t.Errorf("%d messages on the queue, want the one whose body is missing", n)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "id-gone left on the queue") {
		t.Errorf("notes %q", notes)
	}
}

func TestReceiveStopsOnCancel(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	outPath := filepath.Join(t.TempDir(), "results.jsonl")
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(500*time.Millisecond, cancel)
	start := time.Now()
	_, err := Receive(ctx, ReceiveOptions{SQS: sqs.NewFromConfig(cfg), QueueURL: st.OutputQueueURL, Out: outPath})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// Generous: only shows the 20 s long poll was abandoned.
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("stopped after %s: the long poll held the stop", d)
	}
}
