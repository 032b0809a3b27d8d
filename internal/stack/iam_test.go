package stack

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/internal/proc"
)

// grant is one action a function's role allows on one of the stack's
// resources: a logical id, a logical id with a suffix ("BodyBucket/*"), or
// "params" and "params/*" for the parameter path.
type grant struct{ action, resource string }

// functionGrants is what each function's code calls, as the IAM actions
// that authorise it (https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html),
// derived from the product code (the packages the functions link; the
// calls are mapped to actions by sdkActions below and checked against the
// code by TestGrantsAreCalledByTheCode). A change to what a function calls
// changes this table and the role in template.yaml together.
var functionGrants = map[string][]grant{
	IngestFunction: {
		// Lambda writes the function's log lines to its group.
		{"logs:CreateLogStream", "IngestLogGroup"}, {"logs:PutLogEvents", "IngestLogGroup"},
		// The input queue's event source mapping polls with the role.
		{"sqs:ReceiveMessage", "InputQueue"}, {"sqs:DeleteMessage", "InputQueue"}, {"sqs:GetQueueAttributes", "InputQueue"},
		// shared/aws/dynamo: the hosts' write path, and idempotency records.
		{"dynamodb:GetItem", "HostsTable"}, {"dynamodb:PutItem", "HostsTable"}, {"dynamodb:UpdateItem", "HostsTable"},
		{"dynamodb:DeleteItem", "HostsTable"}, {"dynamodb:Query", "HostsTable"},
		// shared/aws/sqsout (results of refused and evicted URLs), shared/aws/wake.
		{"sqs:SendMessage", "OutputQueue"}, {"sqs:SendMessage", "WakeQueue"},
		// shared/aws/ssmparams, by name.
		{"ssm:GetParameters", "params/*"},
	},
	CheckFunction: {
		{"logs:CreateLogStream", "CheckLogGroup"}, {"logs:PutLogEvents", "CheckLogGroup"},
		// The wake queue's event source mapping.
		{"sqs:ReceiveMessage", "WakeQueue"}, {"sqs:DeleteMessage", "WakeQueue"}, {"sqs:GetQueueAttributes", "WakeQueue"},
		// shared/aws/dynamo: leases, the due index, hosts, the robots cache.
		{"dynamodb:GetItem", "HostsTable"}, {"dynamodb:PutItem", "HostsTable"}, {"dynamodb:UpdateItem", "HostsTable"},
		{"dynamodb:DeleteItem", "HostsTable"}, {"dynamodb:Query", "HostsTable"},
		// shared/aws/sqsout.
		{"sqs:SendMessage", "OutputQueue"},
		// shared/aws/s3body and shared/aws/s3warc: bodies and WARC segments.
		{"s3:PutObject", "BodyBucket/*"}, {"s3:GetObject", "BodyBucket/*"}, {"s3:DeleteObject", "BodyBucket/*"},
		{"s3:AbortMultipartUpload", "BodyBucket/*"},
		// A HEAD of a missing key answers 404 only with ListBucket (403
		// without), and s3body reads 404 as "not stored yet".
		{"s3:ListBucket", "BodyBucket"},
		{"ssm:GetParameters", "params/*"},
	},
}

// sdkActions maps each SDK operation the product code may call to the IAM
// actions that authorise it.
var sdkActions = map[string][]string{
	"dynamodb.GetItem":    {"dynamodb:GetItem"},
	"dynamodb.PutItem":    {"dynamodb:PutItem"},
	"dynamodb.UpdateItem": {"dynamodb:UpdateItem"},
	"dynamodb.DeleteItem": {"dynamodb:DeleteItem"},
	"dynamodb.Query":      {"dynamodb:Query"},
	// A transaction is authorised by its actions' own permissions
	// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html):
	// shared/aws/dynamo's refresh writes put and delete items, no
	// ConditionCheck (which would need dynamodb:ConditionCheckItem).
	"dynamodb.TransactWriteItems": {"dynamodb:PutItem", "dynamodb:DeleteItem"},
	// A batch is authorised as its single action.
	"sqs.SendMessageBatch":    {"sqs:SendMessage"},
	"ssm.GetParametersByPath": {"ssm:GetParametersByPath"},
	"ssm.GetParameters":       {"ssm:GetParameters"},
	"s3.PutObject":            {"s3:PutObject"},
	"s3.GetObject":            {"s3:GetObject"},
	"s3.HeadObject":           {"s3:GetObject"},
	"s3.CopyObject":           {"s3:GetObject", "s3:PutObject"},
	"s3.DeleteObject":         {"s3:DeleteObject"},
	// Multipart uploads are authorised as PutObject, but for the abort.
	"s3.CreateMultipartUpload":   {"s3:PutObject"},
	"s3.UploadPart":              {"s3:PutObject"},
	"s3.CompleteMultipartUpload": {"s3:PutObject"},
	"s3.AbortMultipartUpload":    {"s3:AbortMultipartUpload"},
}

// notByFunctions are SDK calls in the product code that no function makes.
var notByFunctions = map[string]string{
	"ssm.PutParameter": "ssmparams.Seed, for the local runner and tests",
}

// lambdaActions are granted for Lambda itself, not for a call of the code:
// its log lines, its event source mappings, and S3's 404 for HeadObject.
var lambdaActions = []string{
	"logs:CreateLogStream", "logs:PutLogEvents",
	"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
	"s3:ListBucket",
}

// dataServices are the services whose actions reach data: none may be
// granted on "*", which would reach every queue, table, bucket or
// parameter of the account.
var dataServices = []string{"sqs", "dynamodb", "s3", "ssm"}

// TestFunctionRolesAreScoped: each function has a role of the template's
// with inline statements only (a managed policy is not the stack's to
// scope: SAM's AWSLambdaSQSQueueExecutionRole allows receiving and
// deleting on every queue), no data action on "*" or by wildcard, and
// exactly the grants of functionGrants.
func TestFunctionRolesAreScoped(t *testing.T) {
	tpl := loadTemplate(t)
	e := deployed(t, tpl, nil)
	for _, fn := range []string{IngestFunction, CheckFunction} {
		role := roleOf(t, tpl, fn)
		if arns := tpl.resources[role].Properties["ManagedPolicyArns"]; arns != nil {
			t.Errorf("%s's role %s has managed policies %v: grant inline what the code calls", fn, role, arns)
		}
		got := map[grant]bool{}
		for _, st := range statements(t, e.props(t, role)) {
			for _, problem := range unscoped(st) {
				t.Errorf("%s: %s", fn, problem)
			}
			for _, a := range st.actions {
				for _, r := range st.resources {
					got[grant{a, r}] = true
				}
			}
		}
		want := map[grant]bool{}
		for _, g := range functionGrants[fn] {
			want[grant{g.action, resourceArn(g.resource)}] = true
		}
		for _, g := range slices.SortedFunc(maps.Keys(got), cmpGrant) {
			if !want[g] {
				t.Errorf("%s may %s on %s: no call of its code needs it", fn, g.action, g.resource)
			}
		}
		for _, g := range slices.SortedFunc(maps.Keys(want), cmpGrant) {
			if !got[g] {
				t.Errorf("%s may not %s on %s, which its code needs", fn, g.action, g.resource)
			}
		}
	}
}

// unscoped returns what a statement grants beyond the stack: a data
// action by wildcard, or on every resource.
func unscoped(st statement) []string {
	var out []string
	for _, a := range st.actions {
		service, name, _ := strings.Cut(a, ":")
		if !slices.Contains(dataServices, service) && service != "*" {
			continue
		}
		if strings.ContainsAny(name, "*?") || a == "*" {
			out = append(out, fmt.Sprintf("wildcard data action %s on %v", a, st.resources))
		}
		for _, r := range st.resources {
			if strings.HasPrefix(r, "*") {
				out = append(out, fmt.Sprintf("%s on %q: every resource of the account", a, r))
			}
		}
	}
	return out
}

func TestUnscoped(t *testing.T) {
	for _, tc := range []struct {
		st   statement
		want int
	}{
		{statement{[]string{"sqs:ReceiveMessage", "sqs:DeleteMessage"}, []string{"*"}}, 2},
		{statement{[]string{"sqs:*"}, []string{"Arn-InputQueue"}}, 1},
		{statement{[]string{"*"}, []string{"*"}}, 2},
		{statement{[]string{"dynamodb:GetItem"}, []string{"*"}}, 1},
		{statement{[]string{"s3:GetObject"}, []string{"Arn-BodyBucket/*"}}, 0},
		{statement{[]string{"ssm:GetParametersByPath"}, []string{"arn:aws:ssm:us-east-1:123456789012:parameter/urldownloader/dev/*"}}, 0},
		{statement{[]string{"logs:PutLogEvents"}, []string{"*"}}, 0}, // not data; the grant table refuses it
	} {
		if got := unscoped(tc.st); len(got) != tc.want {
			t.Errorf("unscoped(%v) = %q, want %d problems", tc.st, got, tc.want)
		}
	}
}

// resourceArn is a functionGrants resource as deployed() evaluates it.
func resourceArn(r string) string {
	const path = "arn:aws:ssm:us-east-1:123456789012:parameter/urldownloader/dev"
	if rest, ok := strings.CutPrefix(r, "params"); ok {
		return path + rest
	}
	id, suffix, _ := strings.Cut(r, "/")
	if suffix != "" {
		suffix = "/" + suffix
	}
	return "Arn-" + id + suffix
}

func cmpGrant(a, b grant) int {
	return strings.Compare(a.action+" "+a.resource, b.action+" "+b.resource)
}

// sdkCall matches an SDK call's input in Go source: &dynamodb.GetItemInput{.
var sdkCall = regexp.MustCompile(`\b(dynamodb|sqs|ssm|s3)\.([A-Z][A-Za-z]*)Input\{`)

// functionMains are the functions' main packages, relative to the module root.
var functionMains = []string{"./functions/ingest", "./functions/check"}

// TestGrantsAreCalledByTheCode keeps functionGrants honest: every SDK call
// in the packages the functions link is authorised by some function's
// grants (or is named in notByFunctions), and every action granted is
// needed by such a call or by Lambda itself.
func TestGrantsAreCalledByTheCode(t *testing.T) {
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	list := exec.Command("go", append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}"}, functionMains...)...)
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list the functions' packages: %v", err)
	}
	calls := map[string]string{} // operation -> a file calling it
	for _, dir := range strings.Fields(string(out)) {
		if !strings.HasPrefix(dir, root+string(filepath.Separator)) {
			continue // the SDK and other modules
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range sdkCall.FindAllStringSubmatch(string(src), -1) {
				rel, _ := filepath.Rel(root, path)
				calls[m[1]+"."+m[2]] = rel
			}
		}
	}
	if len(calls) == 0 {
		t.Fatal("found no SDK call in the functions' packages")
	}
	granted := map[string]bool{}
	for _, gs := range functionGrants {
		for _, g := range gs {
			granted[g.action] = true
		}
	}
	needed := map[string]bool{}
	for _, a := range lambdaActions {
		needed[a] = true
	}
	for _, op := range slices.Sorted(maps.Keys(calls)) {
		if _, ok := notByFunctions[op]; ok {
			continue
		}
		actions, ok := sdkActions[op]
		if !ok {
			t.Errorf("%s calls %s: add its IAM actions to sdkActions and grant them to the function that calls it", calls[op], op)
			continue
		}
		for _, a := range actions {
			needed[a] = true
			if !granted[a] {
				t.Errorf("%s calls %s, which needs %s: no function's role grants it", calls[op], op, a)
			}
		}
	}
	for _, a := range slices.Sorted(maps.Keys(granted)) {
		if !needed[a] {
			t.Errorf("%s is granted but the code makes no call that needs it", a)
		}
	}
}
