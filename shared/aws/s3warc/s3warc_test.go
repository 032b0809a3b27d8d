package s3warc_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/internal/warctest"
	"github.com/urldownloader/urldownloader/shared/aws/s3warc"
	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/warc"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

var date = time.Date(2026, 12, 1, 18, 30, 0, 0, time.UTC)

func exchange(t *testing.T, url string, payload []byte) *warc.Exchange {
	t.Helper()
	p := warc.NewPayload()
	p.Write(payload)
	t.Cleanup(func() { p.Close() })
	return &warc.Exchange{
		URL: url, Date: date, RemoteIP: "127.0.0.1", Protocol: "http/1.1",
		Request:  []byte("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"),
		Response: []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(payload))),
		Payload:  p,
	}
}

// noise is n incompressible bytes.
func noise(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// published records what reached the output queue, and checks at that
// moment that every record the results name can be read.
type published struct {
	t      *testing.T
	client *s3.Client
	mu     sync.Mutex
	got    []result.Result
}

func (p *published) Publish(ctx context.Context, rs []result.Result) error {
	for _, r := range rs {
		readRecord(p.t, p.client, *r.Warc)
	}
	p.mu.Lock()
	p.got = append(p.got, rs...)
	p.mu.Unlock()
	return nil
}

func readRecord(t *testing.T, client *s3.Client, ref warc.Ref) []byte {
	t.Helper()
	rng := fmt.Sprintf("bytes=%d-%d", ref.Offset, ref.Offset+ref.Length-1)
	out, err := client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &ref.Bucket, Key: &ref.Key, Range: &rng})
	if err != nil {
		t.Errorf("record %+v not readable when its result is published: %v", ref, err)
		return nil
	}
	defer out.Body.Close()
	rec, err := warc.ReadRecord(out.Body)
	if err != nil {
		t.Errorf("record %+v: %v", ref, err)
		return nil
	}
	defer rec.Close()
	data, err := io.ReadAll(rec.Payload)
	if err != nil {
		t.Errorf("record %+v: %v", ref, err)
	}
	return data
}

func download(t *testing.T, client *s3.Client, bucket, key string) string {
	t.Helper()
	out, err := client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	path := filepath.Join(t.TempDir(), filepath.Base(key))
	f, _ := os.Create(path)
	io.Copy(f, out.Body)
	f.Close()
	return path
}

// TestSegments: exchanges from many workers go into segments of the body
// bucket; a publish seals the segments its results name first (one PUT
// for a small one, a multipart upload for one past a part), so every
// result's record is one ranged GET when it is published; the segments
// pass warcio check and their index matches the references; a body kept
// in its record alone reads back through wholebody.
func TestSegments(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	client := stack.NewS3(cfg)
	w := s3warc.New(client, st.BodyBucket, s3warc.Options{Info: [][2]string{{"software", "test"}}, Now: func() time.Time { return date }})
	pub := &published{t: t, client: client}
	out := s3warc.Publisher{Publisher: pub, Writer: w}
	ctx := t.Context()

	big := noise(6<<20, 1) // past one 5 MiB part
	payloads := map[string][]byte{"http://a.test/big": big}
	for i := range 20 {
		payloads[fmt.Sprintf("http://a.test/%d", i)] = []byte(fmt.Sprintf("page %d", i))
	}
	var wg sync.WaitGroup
	for url, payload := range payloads {
		wg.Go(func() {
			ref, err := w.Exchange(ctx, exchange(t, url, payload))
			if err != nil {
				t.Error(err)
				return
			}
			sum := sha256.Sum256(payload)
			r := result.Result{ID: url, URL: url, Status: result.StatusFetched, Warc: &ref}
			r.SetStored(body.Ref{Bytes: int64(len(payload)), SHA256: hex.EncodeToString(sum[:])})
			if err := out.Publish(ctx, []result.Result{r}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(pub.got) != len(payloads) {
		t.Fatalf("%d results published, want %d", len(pub.got), len(payloads))
	}
	keys := map[string]bool{}
	reader := wholebody.Reader{S3: client}
	for _, r := range pub.got {
		keys[r.Warc.Key] = true
		if got := readRecord(t, client, *r.Warc); !bytes.Equal(got, payloads[r.URL]) {
			t.Errorf("%s: record payload of %d bytes, want %d", r.URL, len(got), len(payloads[r.URL]))
		}
		data, err := reader.ReadAll(ctx, r)
		if err != nil || !bytes.Equal(data, payloads[r.URL]) {
			t.Errorf("%s: wholebody read %d bytes, %v", r.URL, len(data), err)
		}
	}
	for key := range keys {
		file := download(t, client, st.BodyBucket, key)
		warctest.Check(t, file)
		offsets := map[string]bool{}
		for _, e := range warctest.Index(t, file) {
			offsets[e.Offset+"/"+e.Length] = true
		}
		for _, r := range pub.got {
			if r.Warc.Key == key && !offsets[strconv.FormatInt(r.Warc.Offset, 10)+"/"+strconv.FormatInt(r.Warc.Length, 10)] {
				t.Errorf("%s: ref %+v not in the index of %s", r.URL, *r.Warc, key)
			}
		}
	}
	ups, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &st.BodyBucket})
	if err != nil || len(ups.Uploads) != 0 {
		t.Fatalf("%d uploads left open (%v)", len(ups.Uploads), err)
	}
}

// failingPut fails every PutObject: a segment that never filled a part
// cannot be sealed.
type failingPut struct{ *s3.Client }

func (failingPut) PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return nil, errors.New("injected: put refused")
}

// failingComplete fails every CompleteMultipartUpload.
type failingComplete struct{ *s3.Client }

func (failingComplete) CompleteMultipartUpload(context.Context, *s3.CompleteMultipartUploadInput, ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error) {
	return nil, errors.New("injected: complete refused")
}

// TestSealFailure: a segment that cannot be sealed fails the publish of
// every result in it (their URLs stay queued), is aborted, and leaves no
// object; the results are never published.
func TestSealFailure(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	client := stack.NewS3(cfg)
	ctx := t.Context()
	for _, api := range []s3warc.API{failingPut{client}, failingComplete{client}} {
		w := s3warc.New(api, st.BodyBucket, s3warc.Options{})
		pub := &published{t: t, client: client}
		out := s3warc.Publisher{Publisher: pub, Writer: w}
		payload := bytes.Repeat([]byte{0}, 100)
		if _, ok := api.(failingComplete); ok {
			payload = noise(6<<20, 2)
		}
		ref, err := w.Exchange(ctx, exchange(t, "http://a.test/x", payload))
		if err != nil {
			t.Fatal(err)
		}
		r := result.Result{ID: "x", Status: result.StatusFetched, Warc: &ref}
		for range 2 {
			if err := out.Publish(ctx, []result.Result{r}); err == nil {
				t.Fatalf("%T: publish succeeded for a segment that was not sealed", api)
			}
		}
		if len(pub.got) != 0 {
			t.Fatalf("%T: %d results published", api, len(pub.got))
		}
		if _, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &st.BodyBucket, Key: aws.String(ref.Key)}); err == nil {
			t.Fatalf("%T: the failed segment %s exists", api, ref.Key)
		}
		ups, _ := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &st.BodyBucket})
		if len(ups.Uploads) != 0 {
			t.Fatalf("%T: %d uploads left open", api, len(ups.Uploads))
		}
		// The next exchange goes to a new segment, which seals when S3
		// lets it (one PUT: refused by failingPut only).
		ref2, err := w.Exchange(ctx, exchange(t, "http://a.test/y", []byte("small")))
		if err != nil || ref2.Key == ref.Key {
			t.Fatalf("%T: after a failed segment: %+v, %v", api, ref2, err)
		}
		err = out.Publish(ctx, []result.Result{{ID: "y", Status: result.StatusFetched, Warc: &ref2}})
		if _, put := api.(failingPut); put != (err != nil) {
			t.Fatalf("%T: publish from the next segment: %v", api, err)
		}
	}
}
