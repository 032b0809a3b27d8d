package stack

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// TestTemplateDocumentsEveryParameter: the stack creates no runtime
// parameter (an operator's value must survive every deploy), so the
// template's comments are where its reader learns the names; they must
// list every parameter the code reads, in the code's order, with the
// code's own default.
func TestTemplateDocumentsEveryParameter(t *testing.T) {
	tpl := loadTemplate(t)
	doc, err := tpl.DocumentedParams()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	defaults := params.Defaults().Format()
	for _, p := range doc {
		names = append(names, p.Name)
		if want, ok := defaults[p.Name]; ok && p.Default != want {
			t.Errorf("%s: documented default %q, code default %q", p.Name, p.Default, want)
		}
	}
	if want := params.Names(); !slices.Equal(names, want) {
		t.Errorf("documented parameters %v\nwant the code's %v", names, want)
	}
	for _, id := range tpl.order {
		if r := tpl.resources[id]; r.Type == "AWS::SSM::Parameter" {
			t.Errorf("%s: the stack must not own a parameter's value", id)
		}
	}
}

// TestFunctionsMayReadEveryParameter: each function's policy lets it read
// every parameter by name (GetParameters, as shared/aws/ssmparams reads
// them), and write none.
func TestFunctionsMayReadEveryParameter(t *testing.T) {
	tpl := loadTemplate(t)
	e := deployed(t, tpl, map[string]string{"Stage": "qa"})
	env, err := (&deployer{t: tpl, ev: e}).functionEnv(tpl.resources[IngestFunction].Properties)
	if err != nil {
		t.Fatal(err)
	}
	paramPath := env["PARAM_PATH"]
	if paramPath != "/urldownloader/qa/" {
		t.Fatalf("PARAM_PATH = %q, want /urldownloader/qa/", paramPath)
	}
	arn := func(name string) string {
		return fmt.Sprintf("arn:aws:ssm:us-east-1:123456789012:parameter%s", name)
	}
	for _, fn := range []string{IngestFunction, CheckFunction} {
		var read []string
		for _, st := range statements(t, e.props(t, roleOf(t, tpl, fn))) {
			actions := strings.Join(st.actions, " ")
			if strings.Contains(actions, "ssm:Put") || strings.Contains(actions, "ssm:Delete") || strings.Contains(actions, "ssm:*") {
				t.Errorf("%s may write parameters: %v", fn, st.actions)
			}
			if slices.Contains(st.actions, "ssm:GetParameters") {
				read = append(read, st.resources...)
			}
		}
		for _, name := range params.Names() {
			if !slices.ContainsFunc(read, func(pattern string) bool { return iamMatch(pattern, arn(path.Join(paramPath, name))) }) {
				t.Errorf("%s cannot read %s%s: its resources are %v", fn, paramPath, name, read)
			}
		}
	}
}

type statement struct{ actions, resources []string }

// roleOf returns the logical id of a function's role: the translator
// makes one for each SAM function (<Function>Role) from its Policies.
func roleOf(t *testing.T, tpl *Template, fn string) string {
	t.Helper()
	role := functionOf(tpl.resources[fn].Properties["Role"])
	if r, ok := tpl.resources[role]; !ok || r.Type != "AWS::IAM::Role" {
		t.Fatalf("%s's Role %v is not a role of the template", fn, tpl.resources[fn].Properties["Role"])
	}
	return role
}

// statements returns the Allow statements of a role's inline policies.
func statements(t *testing.T, props map[string]any) []statement {
	t.Helper()
	list := func(v any) []string {
		switch x := v.(type) {
		case string:
			return []string{x}
		case []any:
			var out []string
			for _, el := range x {
				out = append(out, str(el))
			}
			return out
		}
		return nil
	}
	var out []statement
	pols, _ := props["Policies"].([]any)
	for _, p := range pols {
		sts, _ := at(p, "PolicyDocument.Statement").([]any)
		for _, s := range sts {
			if str(at(s, "Effect")) != "Allow" {
				continue
			}
			out = append(out, statement{actions: list(at(s, "Action")), resources: list(at(s, "Resource"))})
		}
	}
	return out
}

// iamMatch matches an ARN against an IAM resource pattern ('*' any run of
// characters, '?' one).
func iamMatch(pattern, arn string) bool {
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	return regexp.MustCompile(re).MatchString(arn)
}
