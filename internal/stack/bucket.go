package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// cfnBucket is an AWS::S3::Bucket's properties as internal/stack creates them
// on moto: encryption, the public access block and the lifecycle rules
// are applied (moto keeps and reports them), so the local bucket is
// configured as the deployed one.
type cfnBucket struct {
	BucketEncryption *struct {
		ServerSideEncryptionConfiguration []struct {
			ServerSideEncryptionByDefault struct {
				SSEAlgorithm   s3types.ServerSideEncryption
				KMSMasterKeyID string
			}
			BucketKeyEnabled *flag
		}
	}
	PublicAccessBlockConfiguration *struct {
		BlockPublicAcls       flag
		BlockPublicPolicy     flag
		IgnorePublicAcls      flag
		RestrictPublicBuckets flag
	}
	LifecycleConfiguration *struct {
		Rules []struct {
			ID                             string `json:"Id"`
			Status                         s3types.ExpirationStatus
			Prefix                         string
			ExpirationInDays               *num
			AbortIncompleteMultipartUpload *struct {
				DaysAfterInitiation num
			}
		}
	}
	// Accepted and ignored: no local meaning (moto's buckets have one owner).
	OwnershipControls json.RawMessage
	BucketName        json.RawMessage // names are always <prefix>-<logicalid>, lowercased
	Tags              json.RawMessage
}

// bucketName is a bucket's name on moto: S3 wants 3 to 63 lowercase
// letters, digits, '-' and '.'.
func (d *deployer) bucketName(id string) string {
	name := strings.ToLower(d.physicalName(id))
	name = strings.ReplaceAll(name, "_", "-")
	if len(name) > 63 {
		name = name[:63]
	}
	return strings.TrimRight(name, "-")
}

func (d *deployer) createBucket(ctx context.Context, r resource) (physical, error) {
	var c cfnBucket
	if err := d.decode(r, &c); err != nil {
		return physical{}, err
	}
	name := d.bucketName(r.ID)
	_, err := d.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name})
	var owned *s3types.BucketAlreadyOwnedByYou
	var exists *s3types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return physical{}, fmt.Errorf("create bucket %s: %w", name, err)
	}
	if e := c.BucketEncryption; e != nil {
		var rules []s3types.ServerSideEncryptionRule
		for _, sc := range e.ServerSideEncryptionConfiguration {
			rule := s3types.ServerSideEncryptionRule{ApplyServerSideEncryptionByDefault: &s3types.ServerSideEncryptionByDefault{
				SSEAlgorithm: sc.ServerSideEncryptionByDefault.SSEAlgorithm,
			}}
			if k := sc.ServerSideEncryptionByDefault.KMSMasterKeyID; k != "" {
				rule.ApplyServerSideEncryptionByDefault.KMSMasterKeyID = &k
			}
			if sc.BucketKeyEnabled != nil {
				rule.BucketKeyEnabled = aws.Bool(bool(*sc.BucketKeyEnabled))
			}
			rules = append(rules, rule)
		}
		if _, err := d.s3.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{
			Bucket: &name, ServerSideEncryptionConfiguration: &s3types.ServerSideEncryptionConfiguration{Rules: rules},
		}); err != nil {
			return physical{}, fmt.Errorf("bucket %s encryption: %w", name, err)
		}
	}
	if p := c.PublicAccessBlockConfiguration; p != nil {
		if _, err := d.s3.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{
			Bucket: &name, PublicAccessBlockConfiguration: &s3types.PublicAccessBlockConfiguration{
				BlockPublicAcls: aws.Bool(bool(p.BlockPublicAcls)), BlockPublicPolicy: aws.Bool(bool(p.BlockPublicPolicy)),
				IgnorePublicAcls: aws.Bool(bool(p.IgnorePublicAcls)), RestrictPublicBuckets: aws.Bool(bool(p.RestrictPublicBuckets)),
			},
		}); err != nil {
			return physical{}, fmt.Errorf("bucket %s public access block: %w", name, err)
		}
	}
	if l := c.LifecycleConfiguration; l != nil {
		var rules []s3types.LifecycleRule
		for _, lr := range l.Rules {
			rule := s3types.LifecycleRule{ID: aws.String(lr.ID), Status: lr.Status,
				Filter: &s3types.LifecycleRuleFilter{Prefix: aws.String(lr.Prefix)}}
			if lr.ExpirationInDays != nil {
				rule.Expiration = &s3types.LifecycleExpiration{Days: aws.Int32(int32(*lr.ExpirationInDays))}
			}
			if a := lr.AbortIncompleteMultipartUpload; a != nil {
				rule.AbortIncompleteMultipartUpload = &s3types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(int32(a.DaysAfterInitiation))}
			}
			rules = append(rules, rule)
		}
		if _, err := d.s3.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
			Bucket: &name, LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: rules},
		}); err != nil {
			return physical{}, fmt.Errorf("bucket %s lifecycle: %w", name, err)
		}
	}
	arn := "arn:aws:s3:::" + name
	return physical{Type: r.Type, Ref: name, Attrs: map[string]string{"Arn": arn, "DomainName": name + ".s3.amazonaws.com"}}, nil
}

// NewS3 returns an S3 client for cfg that addresses buckets by path, as an
// endpoint on loopback (moto) needs: a bucket's own host name would not
// resolve there.
func NewS3(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
}
