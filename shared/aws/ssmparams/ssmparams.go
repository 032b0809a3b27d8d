// Package ssmparams reads the downloader's runtime parameters from AWS
// Systems Manager Parameter Store: one String parameter per name in
// params.Names, directly under a stage path such as /urldownloader/dev/.
//
// It only moves strings: parsing, defaults and caching belong to
// shared/domain/params, whose Cache wraps a Loader from here.
package ssmparams

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// Client is the part of *ssm.Client that Load uses, with the SDK's exact
// signature so tests can pass a fake and main the real client.
type Client interface {
	GetParametersByPath(ctx context.Context, in *ssm.GetParametersByPathInput, optFns ...func(*ssm.Options)) (*ssm.GetParametersByPathOutput, error)
}

// PutClient is the part of *ssm.Client that Seed uses; kept apart from
// Client so the functions, which only read, are never handed a writer.
type PutClient interface {
	PutParameter(ctx context.Context, in *ssm.PutParameterInput, optFns ...func(*ssm.Options)) (*ssm.PutParameterOutput, error)
}

var (
	_ Client        = (*ssm.Client)(nil)
	_ PutClient     = (*ssm.Client)(nil)
	_ params.Loader = (*Loader)(nil)
)

// pageSize is the most GetParametersByPath returns per call: the API
// refuses more, so the 15 parameters take two calls.
const pageSize = 10

// maxPages stops a service that keeps returning a next token; the path
// holds a few dozen parameters at most, so 100 pages means a fault.
const maxPages = 100

// Loader reads every parameter directly under one path, in bulk, because
// Parameter Store allows only ~40 reads per second per account.
type Loader struct {
	client Client
	path   string // normalised: leading and trailing slash
}

// New returns a Loader for the parameters directly under path, for example
// "/urldownloader/dev/". The path is normalised to start and end with one
// slash, so "urldownloader/dev" and "/urldownloader/dev/" are the same.
func New(c Client, path string) *Loader {
	return &Loader{client: c, path: normalise(path)}
}

// Path returns the normalised path, with its trailing slash, for messages.
func (l *Loader) Path() string { return l.path }

// Load returns every parameter directly under the path (not below: the
// read is not recursive), name without the path -> value. SecureString
// values are decrypted, so an operator may store a value encrypted. A
// parameter absent from the map is simply unset; the caller applies its
// default.
func (l *Loader) Load(ctx context.Context) (map[string]string, error) {
	in := &ssm.GetParametersByPathInput{
		Path:           aws.String(apiPath(l.path)),
		Recursive:      aws.Bool(false),
		WithDecryption: aws.Bool(true),
		MaxResults:     aws.Int32(pageSize),
	}
	out := make(map[string]string)
	seen := make(map[string]bool) // next tokens, to stop a looping service
	for page := 1; ; page++ {
		if page > maxPages {
			return nil, fmt.Errorf("read parameters under %s: more than %d pages", l.path, maxPages)
		}
		res, err := l.client.GetParametersByPath(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("read parameters under %s (page %d): %w", l.path, page, err)
		}
		for _, p := range res.Parameters {
			out[l.shortName(p)] = aws.ToString(p.Value)
		}
		next := aws.ToString(res.NextToken)
		if next == "" {
			return out, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("read parameters under %s: page %d repeats a next token", l.path, page)
		}
		seen[next] = true
		in.NextToken = aws.String(next)
	}
}

// shortName strips the path. A name outside the path (which a correct
// service never returns) is kept whole, so params.Parse reports it as an
// unknown parameter instead of it being silently dropped.
func (l *Loader) shortName(p types.Parameter) string {
	name := aws.ToString(p.Name)
	if short, ok := strings.CutPrefix(name, l.path); ok {
		return short
	}
	return name
}

// Seed writes values under path as String parameters, overwriting what is
// there, in name order so a failure is reproducible. It is for the local
// runner and tests: deployments declare the parameters in the template,
// and PutParameter's low rate limit makes it unfit for the functions.
// It stops at the first error, which names the parameter.
func Seed(ctx context.Context, c PutClient, path string, values map[string]string) error {
	path = normalise(path)
	for _, name := range slices.Sorted(maps.Keys(values)) {
		full := path + name
		_, err := c.PutParameter(ctx, &ssm.PutParameterInput{
			Name:      aws.String(full),
			Value:     aws.String(values[name]),
			Type:      types.ParameterTypeString,
			Overwrite: aws.Bool(true),
		})
		if err != nil {
			return fmt.Errorf("seed parameter %s: %w", full, err)
		}
	}
	return nil
}

// normalise gives path exactly one leading and one trailing slash.
func normalise(path string) string {
	path = strings.Trim(strings.TrimSpace(path), "/")
	if path == "" {
		return "/"
	}
	return "/" + path + "/"
}

// apiPath is the form the API documents for Path: the hierarchy without a
// trailing slash, except for the root.
func apiPath(path string) string {
	if path == "/" {
		return path
	}
	return strings.TrimSuffix(path, "/")
}
