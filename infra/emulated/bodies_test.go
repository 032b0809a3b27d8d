package emulated_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// TestWholeBodies is the claim-check pattern end to end on moto: bodies
// larger than InlineBodyBytes are streamed to the template's bucket and
// their results point at them, content-addressed (the same body from two
// hosts is stored once), while a body at the threshold stays inline; the
// check function's heap stays far below the 50 MB body it passes.
func TestWholeBodies(t *testing.T) {
	site, err := demosite.Start(demosite.Options{Hosts: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	h := site.Hosts()
	const (
		mb5  = 5_000_000
		mb50 = 50_000_000
		mb1  = 1_000_000
	)
	inline := int64(params.DefaultInlineBodyBytes)
	want := map[string]struct {
		size   int64
		seed   uint64 // 0: a text page
		stored bool
	}{
		demosite.LargeURL(h[0], mb5, 1):  {mb5, 1, true},
		demosite.LargeURL(h[0], mb50, 2): {mb50, 2, true},
		demosite.LargeURL(h[1], mb1, 3):  {mb1, 3, true},
		demosite.LargeURL(h[2], mb1, 3):  {mb1, 3, true},
		demosite.TextURL(h[1], inline):   {inline, 0, false},
		demosite.TextURL(h[2], inline+1): {inline + 1, 0, true},
	}
	var urls []string
	for u := range want {
		urls = append(urls, u)
	}
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy(), Params: map[string]string{
		"FetchDelay": "100ms", "CheckHostPeriod": "2s", "FetchTimeout": "15s", "MaxBodyBytes": "67108864",
	}})

	// base is the live heap before any body: the pipeline, its SDK
	// clients and what earlier tests of the package left. The bodies'
	// share is what the peak adds to it.
	runtime.GC()
	baseSample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(baseSample)
	base := baseSample[0].Value.Uint64()

	stop := make(chan struct{})
	// peak is the most live heap (as marked by a collection), peakAll the
	// most heap in objects, garbage not yet collected included.
	var peak, peakAll atomic.Uint64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			if v := s[1].Value.Uint64(); v > peakAll.Load() {
				peakAll.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	_, got := runAll(t, p, inputs(urls), 3*time.Minute)
	close(stop)
	<-sampled

	client := stack.NewS3(p.AWS)
	reader := wholebody.Reader{S3: client}
	keys := map[string]bool{}
	for _, r := range got {
		w := want[r.URL]
		if r.Status != result.StatusFetched || r.Truncated {
			t.Errorf("%s: %s truncated=%v (%s), want fetched whole", r.URL, r.Status, r.Truncated, r.Error)
			continue
		}
		sum := demosite.LargeSHA256(w.size, w.seed)
		if w.seed == 0 {
			sum = sha(demosite.TextBody(w.size))
		}
		if r.Bytes != w.size || r.SHA256 != sum {
			t.Errorf("%s: %d bytes sha256 %s, want %d bytes %s", r.URL, r.Bytes, r.SHA256, w.size, sum)
		}
		if !w.stored {
			if r.Body != nil || int64(len(r.Data)) != w.size {
				t.Errorf("%s: body %+v and %d bytes inline, want the %d-byte body inline", r.URL, r.Body, len(r.Data), w.size)
			}
			continue
		}
		ref := r.Body
		if ref == nil || r.Data != "" {
			t.Errorf("%s: no body reference (data %d bytes), want it stored", r.URL, len(r.Data))
			continue
		}
		if ref.Bucket != p.Stack.BodyBucket || ref.Key != body.Key(sum) || ref.Bytes != w.size || ref.SHA256 != sum || ref.ContentType != "application/octet-stream" && w.seed != 0 {
			t.Errorf("%s: reference %+v, want s3://%s/%s, %d bytes", r.URL, *ref, p.Stack.BodyBucket, body.Key(sum), w.size)
		}
		keys[ref.Key] = true
		// Read back through the consumers' package, streamed and verified.
		rc, err := reader.Open(context.Background(), r)
		if err != nil {
			t.Errorf("%s: open body: %v", r.URL, err)
			continue
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || n != w.size {
			t.Errorf("%s: read back %d bytes: %v", r.URL, n, err)
		}
	}
	if len(keys) != 4 {
		t.Errorf("results point at %d objects, want 4 (the 1 MB body of two URLs once)", len(keys))
	}
	ctx := context.Background()
	stored, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &p.Stack.BodyBucket})
	if err != nil {
		t.Fatal(err)
	}
	var objects []string
	for _, o := range stored.Contents {
		objects = append(objects, aws.ToString(o.Key))
		if !keys[aws.ToString(o.Key)] {
			t.Errorf("bucket holds %s, which no result points at", aws.ToString(o.Key))
		}
	}
	if len(objects) != len(keys) {
		t.Errorf("bucket holds %v, want exactly the %d bodies", objects, len(keys))
	}
	ups, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &p.Stack.BodyBucket})
	if err != nil || len(ups.Uploads) != 0 {
		t.Errorf("multipart uploads left: %v %v", ups, err)
	}
	// The process's whole heap (the check function, the pipeline's
	// collector and SDK clients) while a 50 MB body passed through it,
	// and what the bodies added to the heap before them: the store's
	// upload buffers (at most 4 x 5 MiB) and the results in flight, not
	// the bodies themselves.
	t.Logf("peak live heap %.1f MiB (%.1f MiB with garbage not yet collected; %.1f MiB before the run) while fetching bodies of up to %d MB",
		float64(peak.Load())/(1<<20), float64(peakAll.Load())/(1<<20), float64(base)/(1<<20), mb50/1_000_000)
	if added := peak.Load() - min(base, peak.Load()); added > mb50/2 {
		t.Errorf("the bodies added %.1f MiB to the live heap, want well under the 50 MB body (at most half)", float64(added)/(1<<20))
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestMegabyteMessages: with the output queue's OutputMaxMessageBytes at
// SQS's (and moto's) 1 MiB and InlineBodyBytes raised to match, a 600 KB
// body travels whole in its message, while one above the limit still goes
// to the bucket: the template parameter reaches the queue, the publisher's
// cut and the engine's inline limit.
func TestMegabyteMessages(t *testing.T) {
	// Not timing-sensitive: it runs beside the other parallel tests
	// (TestWholeBodies, which measures the heap, does not).
	t.Parallel()
	site, err := demosite.Start(demosite.Options{Hosts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	h := site.Hosts()[0]
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy(),
		TemplateParams: map[string]string{"OutputMaxMessageBytes": "1048576"},
		Params:         map[string]string{"FetchDelay": "100ms", "CheckHostPeriod": "2s", "MaxBodyBytes": "2097152", "InlineBodyBytes": "1032192"},
	})
	inline, stored := demosite.TextURL(h, 600_000), demosite.TextURL(h, 1_040_000)
	rep, got := runAll(t, p, inputs([]string{inline, stored}), 2*time.Minute)
	t.Logf("report %+v", rep)
	for _, r := range got {
		switch r.URL {
		case inline:
			if r.Body != nil || r.Truncated || len(r.Data) != 600_000 || r.SHA256 != sha(demosite.TextBody(600_000)) {
				t.Errorf("600 KB body: %d bytes inline, truncated=%v, body %+v; want it whole in the message", len(r.Data), r.Truncated, r.Body)
			}
		case stored:
			if r.Body == nil || r.Body.Bytes != 1_040_000 || r.Data != "" {
				t.Errorf("1.04 MB body: %d bytes inline, body %+v; want it in the bucket", len(r.Data), r.Body)
			}
		}
	}
}
