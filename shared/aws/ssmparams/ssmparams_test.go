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

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// fakeClient answers GetParameters and PutParameter with the test's
// functions and records the inputs.
type fakeClient struct {
	get  func(in *ssm.GetParametersInput) (*ssm.GetParametersOutput, error)
	put  func(in *ssm.PutParameterInput) error
	gets []ssm.GetParametersInput
	puts []ssm.PutParameterInput
}

func (f *fakeClient) GetParameters(_ context.Context, in *ssm.GetParametersInput, _ ...func(*ssm.Options)) (*ssm.GetParametersOutput, error) {
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

// store answers GetParameters from values (full name -> value), as the
// service does: the names set in Parameters, the others in
// InvalidParameters; more than 10 names is refused.
func store(values map[string]string) func(*ssm.GetParametersInput) (*ssm.GetParametersOutput, error) {
	return func(in *ssm.GetParametersInput) (*ssm.GetParametersOutput, error) {
		if len(in.Names) > 10 {
			return nil, fmt.Errorf("ValidationException: %d names, at most 10", len(in.Names))
		}
		out := &ssm.GetParametersOutput{}
		for _, n := range in.Names {
			if v, ok := values[n]; ok {
				out.Parameters = append(out.Parameters, param(n, v))
			} else {
				out.InvalidParameters = append(out.InvalidParameters, n)
			}
		}
		return out, nil
	}
}

func param(name, value string) types.Parameter {
	return types.Parameter{Name: aws.String(name), Value: aws.String(value)}
}

func TestNormalise(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/urldownloader/dev/", "/urldownloader/dev/"},
		{"/urldownloader/dev", "/urldownloader/dev/"},
		{"urldownloader/dev", "/urldownloader/dev/"},
		{"//urldownloader/dev//", "/urldownloader/dev/"},
		{" /urldownloader/dev/\n", "/urldownloader/dev/"},
		{"", "/"},
		{"/", "/"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if l := New(nil, tt.in); l.Path() != tt.want {
				t.Errorf("New(%q).Path() = %q, want %q", tt.in, l.Path(), tt.want)
			}
		})
	}
}

// TestLoadByName: every parameter name is read by its full name, at most
// 10 a call (GetParameters' limit), decrypted; the names set come back
// without the path, the others are left unset; no call reads by path.
func TestLoadByName(t *testing.T) {
	names := params.Names()
	values := map[string]string{}
	want := map[string]string{}
	for i, n := range names {
		if i%3 == 0 {
			continue // unset
		}
		values["/urldownloader/dev/"+n] = "v" + n
		want[n] = "v" + n
	}
	values["/urldownloader/dev/NotOurs"] = "x"
	c := &fakeClient{get: store(values)}
	l := New(c, "/urldownloader/dev/")
	got, err := l.Load(t.Context())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("Load = %v\nwant %v", got, want)
	}
	wantCalls := (len(names) + 9) / 10
	if len(c.gets) != wantCalls || l.Calls() != wantCalls {
		t.Fatalf("%d calls (Calls says %d), want %d of at most 10 names", len(c.gets), l.Calls(), wantCalls)
	}
	var asked []string
	for i, in := range c.gets {
		if !aws.ToBool(in.WithDecryption) {
			t.Errorf("call %d without decryption", i)
		}
		asked = append(asked, in.Names...)
	}
	var full []string
	for _, n := range names {
		full = append(full, "/urldownloader/dev/"+n)
	}
	if !slices.Equal(asked, full) {
		t.Errorf("names asked %v, want %v", asked, full)
	}
}

func TestLoadNames(t *testing.T) {
	tests := []struct {
		name string
		path string
		in   []types.Parameter
		want map[string]string
	}{
		{"nothing set", "/urldownloader/dev/", nil, map[string]string{}},
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
			first := true
			c := &fakeClient{get: func(*ssm.GetParametersInput) (*ssm.GetParametersOutput, error) {
				out := &ssm.GetParametersOutput{}
				if first {
					out.Parameters = tt.in
				}
				first = false
				return out, nil
			}}
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
	calls := (len(params.Names()) + 9) / 10
	for _, failing := range []int{1, 2} {
		t.Run(fmt.Sprintf("call %d fails", failing), func(t *testing.T) {
			n := 0
			c := &fakeClient{get: func(in *ssm.GetParametersInput) (*ssm.GetParametersOutput, error) {
				n++
				if n == failing {
					return nil, boom
				}
				return store(map[string]string{in.Names[0]: "1s"})(in)
			}}
			got, err := New(c, "/urldownloader/dev/").Load(t.Context())
			want := fmt.Sprintf("read parameters under /urldownloader/dev/ (call %d of %d): boom", failing, calls)
			if err == nil || err.Error() != want || !errors.Is(err, boom) {
				t.Fatalf("Load error = %v, want %q wrapping boom", err, want)
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
