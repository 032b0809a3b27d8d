package ssmparams

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// fakeClient answers GetParametersByPath and PutParameter with the test's
// functions and records the inputs.
type fakeClient struct {
	get  func(in *ssm.GetParametersByPathInput) (*ssm.GetParametersByPathOutput, error)
	put  func(in *ssm.PutParameterInput) error
	gets []ssm.GetParametersByPathInput
	puts []ssm.PutParameterInput
}

func (f *fakeClient) GetParametersByPath(_ context.Context, in *ssm.GetParametersByPathInput, _ ...func(*ssm.Options)) (*ssm.GetParametersByPathOutput, error) {
	f.gets = append(f.gets, *in)
	return f.get(in)
}

func (f *fakeClient) PutParameter(_ context.Context, in *ssm.PutParameterInput, _ ...func(*ssm.Options)) (*ssm.PutParameterOutput, error) {
	f.puts = append(f.puts, *in)
	if f.put != nil {
		if err := f.put(in); err != nil {
			return nil, err
		}
	}
	return &ssm.PutParameterOutput{}, nil
}

// pages serves the given parameters in pages of up to size, with tokens
// "t1", "t2", ... like the service.
func pages(params []types.Parameter, size int) func(*ssm.GetParametersByPathInput) (*ssm.GetParametersByPathOutput, error) {
	return func(in *ssm.GetParametersByPathInput) (*ssm.GetParametersByPathOutput, error) {
		start := 0
		if tok := aws.ToString(in.NextToken); tok != "" {
			fmt.Sscanf(tok, "t%d", &start)
		}
		end := min(start+size, len(params))
		out := &ssm.GetParametersByPathOutput{Parameters: params[start:end]}
		if end < len(params) {
			out.NextToken = aws.String(fmt.Sprintf("t%d", end))
		}
		return out, nil
	}
}

func param(name, value string) types.Parameter {
	return types.Parameter{Name: aws.String(name), Value: aws.String(value)}
}

func TestNormalise(t *testing.T) {
	tests := []struct{ in, want, api string }{
		{"/urldownloader/dev/", "/urldownloader/dev/", "/urldownloader/dev"},
		{"/urldownloader/dev", "/urldownloader/dev/", "/urldownloader/dev"},
		{"urldownloader/dev", "/urldownloader/dev/", "/urldownloader/dev"},
		{"//urldownloader/dev//", "/urldownloader/dev/", "/urldownloader/dev"},
		{" /urldownloader/dev/\n", "/urldownloader/dev/", "/urldownloader/dev"},
		{"", "/", "/"},
		{"/", "/", "/"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			l := New(nil, tt.in)
			if l.Path() != tt.want {
				t.Errorf("New(%q).Path() = %q, want %q", tt.in, l.Path(), tt.want)
			}
			if got := apiPath(l.Path()); got != tt.api {
				t.Errorf("apiPath(%q) = %q, want %q", l.Path(), got, tt.api)
			}
		})
	}
}

func TestLoadPaginates(t *testing.T) {
	var all []types.Parameter
	want := map[string]string{}
	for i := range 23 {
		name := fmt.Sprintf("P%02d", i)
		all = append(all, param("/urldownloader/dev/"+name, "v"+name))
		want[name] = "v" + name
	}
	c := &fakeClient{get: pages(all, 10)}
	got, err := New(c, "/urldownloader/dev/").Load(t.Context())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("Load = %v\nwant %v", got, want)
	}
	if len(c.gets) != 3 {
		t.Fatalf("%d calls, want 3 pages of at most 10", len(c.gets))
	}
	for i, in := range c.gets {
		if aws.ToString(in.Path) != "/urldownloader/dev" || aws.ToBool(in.Recursive) ||
			!aws.ToBool(in.WithDecryption) || aws.ToInt32(in.MaxResults) != 10 {
			t.Errorf("call %d input Path=%q Recursive=%v WithDecryption=%v MaxResults=%d, want /urldownloader/dev false true 10",
				i, aws.ToString(in.Path), aws.ToBool(in.Recursive), aws.ToBool(in.WithDecryption), aws.ToInt32(in.MaxResults))
		}
	}
	if tok := aws.ToString(c.gets[0].NextToken); tok != "" {
		t.Errorf("first call NextToken = %q, want none", tok)
	}
	if tok := aws.ToString(c.gets[2].NextToken); tok != "t20" {
		t.Errorf("third call NextToken = %q, want the second page's t20", tok)
	}
}

func TestLoadNames(t *testing.T) {
	tests := []struct {
		name string
		path string
		in   []types.Parameter
		want map[string]string
	}{
		{"empty path", "/urldownloader/dev/", nil, map[string]string{}},
		{"prefix stripped", "/urldownloader/dev", []types.Parameter{param("/urldownloader/dev/FetchDelay", "5s")},
			map[string]string{"FetchDelay": "5s"}},
		{"name outside the path kept whole", "/urldownloader/dev/",
			[]types.Parameter{param("/urldownloader/prod/FetchDelay", "5s")},
			map[string]string{"/urldownloader/prod/FetchDelay": "5s"}},
		{"nil value is empty", "/a/", []types.Parameter{{Name: aws.String("/a/UserAgent")}},
			map[string]string{"UserAgent": ""}},
		{"root path", "/", []types.Parameter{param("/FetchDelay", "2s")}, map[string]string{"FetchDelay": "2s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &fakeClient{get: pages(tt.in, 10)}
			got, err := New(c, tt.path).Load(t.Context())
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("Load = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		get  func(in *ssm.GetParametersByPathInput) (*ssm.GetParametersByPathOutput, error)
		want string
		is   error
	}{
		{"first page fails", func(*ssm.GetParametersByPathInput) (*ssm.GetParametersByPathOutput, error) {
			return nil, boom
		}, "read parameters under /urldownloader/dev/ (page 1): boom", boom},
		{"second page fails", func(in *ssm.GetParametersByPathInput) (*ssm.GetParametersByPathOutput, error) {
			if in.NextToken != nil {
				return nil, boom
			}
			return &ssm.GetParametersByPathOutput{NextToken: aws.String("x")}, nil
		}, "read parameters under /urldownloader/dev/ (page 2): boom", boom},
		{"token repeats", func(*ssm.GetParametersByPathInput) (*ssm.GetParametersByPathOutput, error) {
			return &ssm.GetParametersByPathOutput{NextToken: aws.String("same")}, nil
		}, "read parameters under /urldownloader/dev/: page 2 repeats a next token", nil},
		{"endless tokens", func(in *ssm.GetParametersByPathInput) (*ssm.GetParametersByPathOutput, error) {
			return &ssm.GetParametersByPathOutput{NextToken: aws.String(aws.ToString(in.NextToken) + "x")}, nil
		}, "read parameters under /urldownloader/dev/: more than 100 pages", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := New(&fakeClient{get: tt.get}, "/urldownloader/dev/").Load(t.Context())
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Load error = %v, want %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Load error %v does not wrap %v", err, tt.is)
			}
			if got != nil {
				t.Errorf("Load returned %v with its error, want nil: a partial read is not a read", got)
			}
		})
	}
}

func TestSeed(t *testing.T) {
	c := &fakeClient{}
	values := map[string]string{"PersistLimit": "10", "FetchDelay": "5s", "CheckHostPeriod": "2s"}
	if err := Seed(t.Context(), c, "urldownloader/test", values); err != nil {
		t.Fatalf("Seed: %v", err)
	}
	var names []string
	for _, in := range c.puts {
		names = append(names, aws.ToString(in.Name))
		if in.Type != types.ParameterTypeString || !aws.ToBool(in.Overwrite) {
			t.Errorf("put %s Type=%q Overwrite=%v, want String true", aws.ToString(in.Name), in.Type, aws.ToBool(in.Overwrite))
		}
		short := strings.TrimPrefix(aws.ToString(in.Name), "/urldownloader/test/")
		if aws.ToString(in.Value) != values[short] {
			t.Errorf("put %s = %q, want %q", aws.ToString(in.Name), aws.ToString(in.Value), values[short])
		}
	}
	want := []string{"/urldownloader/test/CheckHostPeriod", "/urldownloader/test/FetchDelay", "/urldownloader/test/PersistLimit"}
	if !slices.Equal(names, want) {
		t.Errorf("put names %v, want in sorted order %v", names, want)
	}

	boom := errors.New("throttled")
	c = &fakeClient{put: func(in *ssm.PutParameterInput) error {
		if strings.HasSuffix(aws.ToString(in.Name), "FetchDelay") {
			return boom
		}
		return nil
	}}
	err := Seed(t.Context(), c, "/urldownloader/test/", values)
	if !errors.Is(err, boom) || err.Error() != "seed parameter /urldownloader/test/FetchDelay: throttled" {
		t.Errorf("Seed error = %v, want the failing parameter named and the cause wrapped", err)
	}
	if len(c.puts) != 2 {
		t.Errorf("%d puts, want 2: Seed stops at the first error", len(c.puts))
	}
}
