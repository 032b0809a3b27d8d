package s3body_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/s3body"
	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/body/bodytest"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// deploy creates the template's stack on moto and returns its body
// bucket and a client for it.
func deploy(t *testing.T) (string, *s3.Client) {
	t.Helper()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	return st.BodyBucket, stack.NewS3(cfg)
}

func TestContract(t *testing.T) {
	t.Parallel()
	bodytest.Run(t, func(t *testing.T) bodytest.Env {
		bucket, client := deploy(t)
		list := func(t *testing.T, prefix string) []string {
			out, err := client.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix)})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range out.Contents {
				keys = append(keys, aws.ToString(o.Key))
			}
			return keys
		}
		return bodytest.Env{
			Store:  s3body.New(client, bucket, s3body.Options{}),
			Reader: wholebody.Reader{S3: client},
			Keys:   func(t *testing.T) []string { return list(t, body.KeyPrefix) },
			Temps: func(t *testing.T) int {
				ups, err := client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &bucket})
				if err != nil {
					t.Fatal(err)
				}
				return len(list(t, body.TempPrefix)) + len(ups.Uploads)
			},
			// Three parts, the last one short.
			Large: 2*s3body.DefaultPartBytes + 123,
		}
	})
}

// TestTemplateBucket: the local stack's bucket has the template's
// settings: encryption, public access blocked, bodies expiring after
// BodyRetentionDays, uploads a crash left behind after a day.
func TestTemplateBucket(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{TemplateParams: map[string]string{"BodyRetentionDays": "9"}})
	client := stack.NewS3(cfg)
	ctx := t.Context()
	enc, err := client.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: &st.BodyBucket})
	if err != nil || len(enc.ServerSideEncryptionConfiguration.Rules) != 1 ||
		enc.ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault.SSEAlgorithm != types.ServerSideEncryptionAes256 {
		t.Errorf("encryption %+v %v, want AES256", enc, err)
	}
	pab, err := client.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: &st.BodyBucket})
	if err != nil || !aws.ToBool(pab.PublicAccessBlockConfiguration.BlockPublicAcls) || !aws.ToBool(pab.PublicAccessBlockConfiguration.RestrictPublicBuckets) {
		t.Errorf("public access block %+v %v, want all blocked", pab, err)
	}
	lc, err := client.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: &st.BodyBucket})
	if err != nil {
		t.Fatal(err)
	}
	var all, tmp bool
	for _, r := range lc.Rules {
		prefix := ""
		if r.Filter != nil {
			prefix = aws.ToString(r.Filter.Prefix)
		}
		days := int32(0)
		if r.Expiration != nil {
			days = aws.ToInt32(r.Expiration.Days)
		}
		switch {
		case prefix == "" && days == 9 && r.AbortIncompleteMultipartUpload != nil && aws.ToInt32(r.AbortIncompleteMultipartUpload.DaysAfterInitiation) == 1:
			all = true
		case prefix == body.TempPrefix && days == 1:
			tmp = true
		}
	}
	if !all || !tmp {
		t.Errorf("lifecycle rules %+v: want everything expired after BodyRetentionDays (9) with uploads aborted after 1, and %s after 1", lc.Rules, body.TempPrefix)
	}
	if st.Functions[stack.CheckFunction].Env["BODY_BUCKET"] != st.BodyBucket {
		t.Errorf("check function's BODY_BUCKET %q, want %q", st.Functions[stack.CheckFunction].Env["BODY_BUCKET"], st.BodyBucket)
	}
}

// TestRefresh: a body found stored but older than Refresh is written
// again, so it lives as long as the result that points at it.
func TestRefresh(t *testing.T) {
	t.Parallel()
	bucket, client := deploy(t)
	data := bytes.Repeat([]byte("refresh "), 1000)
	clock := time.Now()
	s := s3body.New(client, bucket, s3body.Options{Refresh: time.Hour, Now: func() time.Time { return clock }})
	ref, err := s.Put(t.Context(), bytes.NewReader(data), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	if ref.Bucket != bucket || s.Bucket() != bucket {
		t.Errorf("reference names bucket %q, store %q; want %q", ref.Bucket, s.Bucket(), bucket)
	}
	first := modified(t, client, bucket, ref.Key)
	time.Sleep(1100 * time.Millisecond) // S3 times are whole seconds
	if _, err := s.Put(t.Context(), bytes.NewReader(data), "text/plain"); err != nil {
		t.Fatal(err)
	}
	if again := modified(t, client, bucket, ref.Key); !again.Equal(first) {
		t.Errorf("a fresh body was written again (%s, then %s)", first, again)
	}
	clock = clock.Add(2 * time.Hour)
	if _, err := s.Put(t.Context(), bytes.NewReader(data), "text/plain"); err != nil {
		t.Fatal(err)
	}
	if again := modified(t, client, bucket, ref.Key); !again.After(first) {
		t.Errorf("a body older than Refresh was not written again (%s, then %s)", first, again)
	}
}

func modified(t *testing.T, client *s3.Client, bucket, key string) time.Time {
	t.Helper()
	out, err := client.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToTime(out.LastModified)
}
