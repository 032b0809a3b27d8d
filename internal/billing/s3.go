package billing

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
)

// S3 request classes as S3 prices them: PUT, COPY, POST and LIST requests
// (CreateMultipartUpload, UploadPart and CompleteMultipartUpload are each
// one) cost more than GET, HEAD and the rest; DELETE and aborting an
// upload are free.
const (
	S3ClassPut  = "put"
	S3ClassGet  = "get"
	S3ClassFree = "free"
)

// S3Class is the price class of an S3 API operation.
func S3Class(op string) string {
	switch op {
	case "PutObject", "CopyObject", "CreateMultipartUpload", "UploadPart", "UploadPartCopy",
		"CompleteMultipartUpload", "ListObjectsV2", "ListObjects", "ListMultipartUploads", "ListParts":
		return S3ClassPut
	case "DeleteObject", "DeleteObjects", "AbortMultipartUpload":
		return S3ClassFree
	}
	return S3ClassGet
}

// S3Line is the usage of one S3 API.
type S3Line struct {
	Op       string `json:"op"`
	Class    string `json:"class"`
	Requests int    `json:"requests"`
	// Bytes are the bytes sent (PutObject, UploadPart).
	Bytes int64 `json:"bytes"`
}

// S3Counter counts the S3 requests of the clients it is added to, by API.
// It is safe for concurrent use.
type S3Counter struct {
	mu    sync.Mutex
	lines map[string]*S3Line
}

// NewS3Counter returns an empty counter.
func NewS3Counter() *S3Counter { return &S3Counter{lines: map[string]*S3Line{}} }

// Option adds the counter to an S3 client: s3.NewFromConfig(cfg, c.Option).
func (c *S3Counter) Option(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("S3Counter", c.handle), middleware.After)
	})
}

// Lines returns the counts so far, sorted by API.
func (c *S3Counter) Lines() []S3Line {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []S3Line
	for _, k := range slices.Sorted(maps.Keys(c.lines)) {
		out = append(out, *c.lines[k])
	}
	return out
}

// Requests sums the requests of one price class.
func (c *S3Counter) Requests(class string) int {
	n := 0
	for _, l := range c.Lines() {
		if l.Class == class {
			n += l.Requests
		}
	}
	return n
}

func (c *S3Counter) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleInitialize(ctx, in)
	op := awsmiddleware.GetOperationName(ctx)
	var n int64
	switch p := in.Parameters.(type) {
	case *s3.PutObjectInput:
		n = aws.ToInt64(p.ContentLength)
	case *s3.UploadPartInput:
		n = aws.ToInt64(p.ContentLength)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.lines[op]
	if l == nil {
		l = &S3Line{Op: op, Class: S3Class(op)}
		c.lines[op] = l
	}
	l.Requests++
	l.Bytes += n
	return out, md, err
}
