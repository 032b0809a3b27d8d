package emulated_test

import (
	"bytes"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/internal/warctest"
	"github.com/urldownloader/urldownloader/shared/aws/s3warc"
	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
	"github.com/urldownloader/urldownloader/shared/web/warc"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// TestWarcOutput is WarcOutput end to end on moto: the check function
// keeps every request (robots.txt included) as WARC records in segments
// under warc/ in the body bucket; every result names its record
// {bucket, key, offset, length}, readable by one ranged GET; a body above
// InlineBodyBytes has no object of its own under sha256/ and reads back
// whole from its record through wholebody; the segments pass warcio check
// and their index has every result's record, with the result's sha256 as
// its payload digest.
func TestWarcOutput(t *testing.T) {
	site, err := demosite.Start(demosite.Options{Hosts: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	h := site.Hosts()
	const large = 1_000_000
	urls := []string{site.URL(h[0], 0), site.URL(h[0], 1), site.URL(h[1], 0), demosite.LargeURL(h[1], large, 5)}
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy(), TemplateParams: map[string]string{"WarcOutput": "true"},
		Params: map[string]string{"FetchDelay": "100ms", "CheckHostPeriod": "2s", "MaxBodyBytes": "4194304"}})
	_, got := runAll(t, p, inputs(urls), 2*time.Minute)

	client := stack.NewS3(p.AWS)
	ctx := t.Context()
	reader := wholebody.Reader{S3: client}
	bucket := ""
	for _, r := range got {
		if r.Status != result.StatusFetched || r.Warc == nil || r.Warc.Key == "" || !strings.HasPrefix(r.Warc.Key, s3warc.Prefix) {
			t.Fatalf("%s: %s (%s), warc %+v: want fetched, naming a segment under %s", r.URL, r.Status, r.Error, r.Warc, s3warc.Prefix)
		}
		bucket = r.Warc.Bucket
		rng := fmt.Sprintf("bytes=%d-%d", r.Warc.Offset, r.Warc.Offset+r.Warc.Length-1)
		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: &r.Warc.Bucket, Key: &r.Warc.Key, Range: &rng})
		if err != nil {
			t.Fatalf("%s: ranged GET of its record: %v", r.URL, err)
		}
		rec, err := warc.ReadRecord(out.Body)
		if err != nil || rec.Fields.Get("WARC-Target-URI") != r.URL || rec.Status != r.HTTPStatus {
			t.Fatalf("%s: record %v (%v)", r.URL, rec, err)
		}
		rec.Close()
		out.Body.Close()
		data, err := reader.ReadAll(ctx, r)
		if err != nil || sha(data) != r.SHA256 {
			t.Fatalf("%s: wholebody: %d bytes, %v", r.URL, len(data), err)
		}
		if r.Bytes == large && (r.Body == nil || r.Body.Key != "" || r.Body.Path != "") {
			t.Fatalf("%s: body %+v, want one kept in its record alone", r.URL, r.Body)
		}
	}
	objs, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket})
	if err != nil {
		t.Fatal(err)
	}
	var segments []string
	for _, o := range objs.Contents {
		key := aws.ToString(o.Key)
		switch {
		case strings.HasPrefix(key, s3warc.Prefix):
			segments = append(segments, key)
		case strings.HasPrefix(key, body.KeyPrefix):
			t.Errorf("a body object %s beside the WARC records", key)
		}
	}
	dir := t.TempDir()
	byRecord := map[string]warctest.Entry{}
	responses := 0
	for i, key := range segments {
		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		io.Copy(&buf, out.Body)
		out.Body.Close()
		file := filepath.Join(dir, strconv.Itoa(i)+".warc.gz")
		os.WriteFile(file, buf.Bytes(), 0o644)
		warctest.Check(t, file)
		for _, e := range warctest.Index(t, file) {
			if !e.IsRequest() && !e.IsInfo() {
				byRecord[key+"@"+e.Offset] = e
				responses++
			}
		}
	}
	for _, r := range got {
		e, ok := byRecord[r.Warc.Key+"@"+strconv.FormatInt(r.Warc.Offset, 10)]
		if !ok || e.Digest != b32(r.SHA256) {
			t.Errorf("%s: index entry %+v for %+v, want payload digest %s", r.URL, e, *r.Warc, b32(r.SHA256))
		}
	}
	// Each host's robots.txt is a record too.
	if responses != len(urls)+2 {
		t.Errorf("%d response records in %d segments, want %d", responses, len(segments), len(urls)+2)
	}
}

// b32 is a hex SHA-256 as a WARC payload digest spells it.
func b32(hexSum string) string {
	sum, _ := hex.DecodeString(hexSum)
	return "sha256:" + base32.StdEncoding.EncodeToString(sum)
}
