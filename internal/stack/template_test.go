package stack

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/internal/proc"
)

// The translator reads YAML 1.1, as CloudFormation does: a condition
// named On or Yes would be read as true where it is unquoted.
func TestParseTurnsShortTagsIntoLongForm(t *testing.T) {
	tpl, err := Parse([]byte(`
Conditions:
  IsOne: !Equals [!Ref P, "1"]
  Both: !And [!Condition IsOne, !Not [!Condition IsOne]]
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      A: !Ref P
      B: !Sub "x-${P}"
      C: !GetAtt Other.Arn
      D: !If [IsOne, !Sub ["${v}", {v: !Ref P}], !Ref AWS::NoValue]
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := map[string]any{
		"A": map[string]any{"Ref": "P"},
		"B": map[string]any{"Fn::Sub": "x-${P}"},
		"C": map[string]any{"Fn::GetAtt": []any{"Other", "Arn"}},
		"D": map[string]any{"Fn::If": []any{"IsOne",
			map[string]any{"Fn::Sub": []any{"${v}", map[string]any{"v": map[string]any{"Ref": "P"}}}},
			map[string]any{"Ref": "AWS::NoValue"},
		}},
	}
	if got := tpl.resources["Q"].Properties; !reflect.DeepEqual(got, want) {
		t.Errorf("Properties =\n%#v\nwant\n%#v", got, want)
	}
	wantCond := map[string]any{"Fn::And": []any{map[string]any{"Condition": "IsOne"}, map[string]any{"Fn::Not": []any{map[string]any{"Condition": "IsOne"}}}}}
	if got := tpl.conditions["Both"]; !reflect.DeepEqual(got, wantCond) {
		t.Errorf("condition Both = %#v, want %#v", got, wantCond)
	}
}

func TestParseRejectsBadTemplates(t *testing.T) {
	for name, text := range map[string]string{
		"empty":        ``,
		"no resources": "Parameters: {}\n",
		"no type":      "Resources:\n  X:\n    Properties: {}\n",
		// A duplicate key is cfn-lint's to refuse (make validate): the
		// translator's YAML reader keeps the last one.
		"not a mapping": "- a\n",
		"SAM error":     "Transform: AWS::Serverless-2016-10-31\nResources:\n  F:\n    Type: AWS::Serverless::Function\n    Properties: {Runtime: 7}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(text)); err == nil {
				t.Error("Parse succeeded")
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	tpl, err := Parse([]byte(`
Parameters:
  Stage: {Type: String, Default: dev}
  N: {Type: Number, Default: 3}
Mappings:
  Sizes:
    "3": {Max: 4}
Conditions:
  IsDev: !Equals [!Ref Stage, dev]
  Big: !Or [!Equals [!Ref N, "9"], !Equals [!Ref N, "10"]]
Resources:
  Q: {Type: AWS::SQS::Queue}
`))
	if err != nil {
		t.Fatal(err)
	}
	e := &evaluator{t: tpl, params: map[string]string{"Stage": "dev", "N": "3"}, stackName: "st",
		created: map[string]physical{"Q": {Type: "AWS::SQS::Queue", Ref: "http://q", Attrs: map[string]string{"Arn": "arn:q"}}}}
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"Ref parameter", map[string]any{"Ref": "N"}, "3"},
		{"Ref resource", map[string]any{"Ref": "Q"}, "http://q"},
		{"Ref pseudo", map[string]any{"Ref": "AWS::Region"}, "us-east-1"},
		{"Sub", map[string]any{"Fn::Sub": "/u/${Stage}/${Q.Arn}/${AWS::AccountId}/${!Keep}"}, "/u/dev/arn:q/123456789012/${Keep}"},
		{"Sub with map", map[string]any{"Fn::Sub": []any{"${a}-${Stage}", map[string]any{"a": map[string]any{"Ref": "N"}}}}, "3-dev"},
		{"GetAtt", map[string]any{"Fn::GetAtt": []any{"Q", "Arn"}}, "arn:q"},
		{"GetAtt dotted", map[string]any{"Fn::GetAtt": "Q.Arn"}, "arn:q"},
		{"If true", map[string]any{"Fn::If": []any{"IsDev", "a", "b"}}, "a"},
		{"If false", map[string]any{"Fn::If": []any{"Big", "a", "b"}}, "b"},
		{"Not", map[string]any{"Fn::Not": []any{map[string]any{"Condition": "Big"}}}, true},
		{"And", map[string]any{"Fn::And": []any{map[string]any{"Condition": "IsDev"}, map[string]any{"Condition": "Big"}}}, false},
		{"Join", map[string]any{"Fn::Join": []any{",", []any{"a", map[string]any{"Ref": "N"}, 7}}}, "a,3,7"},
		{"Select Split", map[string]any{"Fn::Select": []any{"1", map[string]any{"Fn::Split": []any{"/", "a/b/c"}}}}, "b"},
		{"FindInMap", map[string]any{"Fn::FindInMap": []any{"Sizes", map[string]any{"Ref": "N"}, "Max"}}, float64(4)},
		{"Contains", map[string]any{"Fn::Contains": []any{[]any{"1", "3"}, map[string]any{"Ref": "N"}}}, true},
		{"Contains not", map[string]any{"Fn::Contains": []any{[]any{"1", "2"}, map[string]any{"Ref": "N"}}}, false},
		{"NoValue drops", map[string]any{"k": map[string]any{"Ref": "AWS::NoValue"}, "l": []any{1, map[string]any{"Ref": "AWS::NoValue"}}}, map[string]any{"l": []any{1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.eval(tc.in)
			if err != nil {
				t.Fatalf("eval: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("eval = %#v, want %#v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		in   any
	}{
		{"unknown name", map[string]any{"Ref": "Nope"}},
		{"unknown condition", map[string]any{"Condition": "Nope"}},
		{"unknown attribute", map[string]any{"Fn::GetAtt": []any{"Q", "Nope"}}},
		{"unsupported function", map[string]any{"Fn::Base64": "x"}},
		{"Sub of unknown", map[string]any{"Fn::Sub": "${Nope}"}},
		{"GetAtt without attribute", map[string]any{"Fn::GetAtt": []any{"Q"}}},
		{"FindInMap unknown key", map[string]any{"Fn::FindInMap": []any{"Sizes", "7", "Max"}}},
		{"FindInMap unknown map", map[string]any{"Fn::FindInMap": []any{"Nope", "3", "Max"}}},
	} {
		t.Run("error/"+tc.name, func(t *testing.T) {
			if got, err := e.eval(tc.in); err == nil {
				t.Errorf("eval = %#v, want an error", got)
			}
		})
	}
}

func TestParameterCheck(t *testing.T) {
	one, sixteen := 1.0, 16.0
	stage := Parameter{Name: "Stage", Type: "String", AllowedPattern: "[a-z0-9-]+"}
	shards := Parameter{Name: "ShardCount", Type: "Number", AllowedValues: []string{"1", "2", "4"}}
	size := Parameter{Name: "Size", Type: "Number", MinValue: &one, MaxValue: &sixteen}
	for _, tc := range []struct {
		p     Parameter
		value string
		ok    bool
	}{
		{stage, "dev", true},
		{stage, "pr-42", true},
		{stage, "Dev", false}, // the pattern must match the whole value
		{stage, "dev_1", false},
		{shards, "4", true},
		{shards, "3", false},
		{shards, "four", false},
		{size, "16", true},
		{size, "0", false},
		{size, "17", false},
	} {
		err := tc.p.Check(tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("%s.Check(%q) = %v, want ok=%v", tc.p.Name, tc.value, err, tc.ok)
		}
	}
}

func loadTemplate(t *testing.T) *Template {
	t.Helper()
	tpl, err := Load("")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return tpl
}

// TestShardConditions checks the chain of conditions in template.yaml:
// shard N has a schedule exactly when ShardCount > N.
func TestShardConditions(t *testing.T) {
	tpl := loadTemplate(t)
	p := tpl.params["ShardCount"]
	if len(p.AllowedValues) != 16 {
		t.Fatalf("ShardCount AllowedValues = %v, want 1 to 16", p.AllowedValues)
	}
	for count := 1; count <= 16; count++ {
		e := &evaluator{t: tpl, params: map[string]string{"ShardCount": strconv.Itoa(count), "Stage": "dev"}}
		for shard := range 16 {
			got, err := e.condition(fmt.Sprintf("Shard%dEnabled", shard))
			if err != nil {
				t.Fatalf("ShardCount=%d: %v", count, err)
			}
			if want := count > shard; got != want {
				t.Errorf("ShardCount=%d: Shard%dEnabled = %v, want %v", count, shard, got, want)
			}
		}
	}
}

func TestDocumentedParams(t *testing.T) {
	tpl, err := Parse([]byte(`
Resources:
  # BEGIN runtime parameters
  #   FetchDelay [1s] Least time between two requests to one host.
  #   UserAgent [ua/1.0 (+https://x.example)] Sent with every request.
  # END runtime parameters
  Q: {Type: AWS::SQS::Queue}
`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.DocumentedParams()
	want := []DocParam{
		{"FetchDelay", "1s", "Least time between two requests to one host."},
		{"UserAgent", "ua/1.0 (+https://x.example)", "Sent with every request."},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("DocumentedParams = %+v, %v; want %+v", got, err, want)
	}
	for name, text := range map[string]string{
		"no block":       "Resources:\n  Q: {Type: AWS::SQS::Queue}\n",
		"no end":         "Resources:\n  # BEGIN runtime parameters\n  #   A [1] b\n  Q: {Type: AWS::SQS::Queue}\n",
		"no default":     "Resources:\n  # BEGIN runtime parameters\n  #   A b\n  # END runtime parameters\n  Q: {Type: AWS::SQS::Queue}\n",
		"no meaning":     "Resources:\n  # BEGIN runtime parameters\n  #   A [1]\n  # END runtime parameters\n  Q: {Type: AWS::SQS::Queue}\n",
		"end then begin": "Resources:\n  # END runtime parameters\n  # BEGIN runtime parameters\n  Q: {Type: AWS::SQS::Queue}\n",
	} {
		t.Run(name, func(t *testing.T) {
			tpl, err := Parse([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := tpl.DocumentedParams(); err == nil {
				t.Errorf("DocumentedParams = %+v, want an error", got)
			}
		})
	}
}

func TestRatePeriod(t *testing.T) {
	for expr, want := range map[string]string{
		"rate(1 minute)":      "1m0s",
		"rate(5 minutes)":     "5m0s",
		"rate(2 hours)":       "2h0m0s",
		"cron(0 12 * * ? *)":  "0s",
		"rate(1 fortnight)":   "error",
		"every minute please": "error",
	} {
		d, err := ratePeriod(expr)
		got := d.String()
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("ratePeriod(%q) = %s, want %s", expr, got, want)
		}
	}
}

func TestUniquePrefixIsValid(t *testing.T) {
	seen := map[string]bool{}
	for _, base := range []string{"TestDeploy/sub_test", "", "---", strings.Repeat("x", 100)} {
		p := UniquePrefix(base)
		if !validPrefix.MatchString(p) {
			t.Errorf("UniquePrefix(%q) = %q: not a valid prefix", base, p)
		}
		if seen[p] {
			t.Errorf("UniquePrefix(%q) = %q twice", base, p)
		}
		seen[p] = true
		if err := (Parameter{Name: "Stage", AllowedPattern: "[a-z0-9-]+"}).Check(stageFromPrefix(p)); err != nil {
			t.Errorf("stage of %q: %v", p, err)
		}
	}
}

// TestTranslatorIgnoresAnEmptyProfile: tests clear AWS_PROFILE by setting
// it empty, and botocore refuses that with ProfileNotFound. The translator
// needs no profile, so a cold cache must translate all the same.
func TestTranslatorIgnoresAnEmptyProfile(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_DEFAULT_PROFILE", "")
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := runTranslator(data)
	if err != nil {
		t.Fatalf("translate with AWS_PROFILE empty: %v", err)
	}
	if !bytes.Contains(out, []byte("AWS::Lambda::Function")) {
		t.Errorf("translation names no Lambda function:\n%.300s", out)
	}
}
