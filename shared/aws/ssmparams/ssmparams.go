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
	GetParameters(ctx context.Context, in *ssm.GetParametersInput, optFns ...func(*ssm.Options)) (*ssm.GetParametersOutput, error)
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

// NamesPerCall is the most names GetParameters takes in one call.
const NamesPerCall = 10

// Loader reads the parameters params.Names lists, by name, NamesPerCall a
// call. By name, not GetParametersByPath: Parameter Store allows 40
// transactions a second per account and region, shared by both calls,
// and its higher-throughput setting raises GetParameters into the
// thousands but GetParametersByPath only to 100 ("AWS Systems Manager
// endpoints and quotas"). A parameter under the path that is not a name
// of ours (a typo) is not read.
type Loader struct {
	client Client
	path   string   // normalised: leading and trailing slash
	names  []string // params.Names
}

// New returns a Loader for the parameters directly under path, for example
// "/urldownloader/dev/". The path is normalised to start and end with one
// slash, so "urldownloader/dev" and "/urldownloader/dev/" are the same.
func New(c Client, path string) *Loader {
	return &Loader{client: c, path: normalise(path), names: params.Names()}
}

// Path returns the normalised path, with its trailing slash, for messages.
func (l *Loader) Path() string { return l.path }

// Calls is how many requests one Load makes.
func (l *Loader) Calls() int { return (len(l.names) + NamesPerCall - 1) / NamesPerCall }

// Load returns the parameters set under the path, name without the path
// -> value. SecureString values are decrypted, so an operator may store a
// value encrypted. A parameter absent from the map is simply unset; the
// caller applies its default. Any call failing fails the Load: a partial
// read is not a read.
func (l *Loader) Load(ctx context.Context) (map[string]string, error) {
	out := make(map[string]string)
	call := 0
	for names := range slices.Chunk(l.names, NamesPerCall) {
		call++
		full := make([]string, len(names))
		for i, n := range names {
			full[i] = l.path + n
		}
		res, err := l.client.GetParameters(ctx, &ssm.GetParametersInput{Names: full, WithDecryption: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("read parameters under %s (call %d of %d): %w", l.path, call, l.Calls(), err)
		}
		// res.InvalidParameters lists the names not set: their defaults
		// apply.
		for _, p := range res.Parameters {
			out[l.shortName(p)] = aws.ToString(p.Value)
		}
	}
	return out, nil
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
