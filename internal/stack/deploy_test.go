package stack_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dt "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/config"
	"github.com/urldownloader/urldownloader/shared/aws/ssmparams"
	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// TestDeployTwice deploys template.yaml twice on one moto server, with
// different prefixes and shard counts, and checks each deployment against
// what the template declares.
func TestDeployTwice(t *testing.T) {
	a, cfg := stack.DeployForTest(t, stack.Options{ShardCount: 3, ParamOverrides: map[string]string{"CheckHostPeriod": "2s"}})
	b, _ := stack.DeployForTest(t, stack.Options{})
	if a.TableName == b.TableName || a.InputQueueURL == b.InputQueueURL || a.ParamPath == b.ParamPath {
		t.Fatalf("two deployments share resources: %+v and %+v", a, b)
	}
	for _, tc := range []struct {
		st     *stack.Stack
		shards int
		set    map[string]string
	}{{a, 3, map[string]string{"CheckHostPeriod": "2s"}}, {b, 4, map[string]string{}}} {
		t.Run(tc.st.Prefix, func(t *testing.T) {
			checkTable(t, cfg, tc.st)
			checkQueues(t, cfg, tc.st)
			checkParams(t, cfg, tc.st, tc.set)
			checkFunctions(t, tc.st, tc.shards)
		})
	}
}

func checkTable(t *testing.T, cfg aws.Config, st *stack.Stack) {
	t.Helper()
	db := dynamodb.NewFromConfig(cfg)
	out, err := db.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: &st.TableName})
	if err != nil {
		t.Fatalf("DescribeTable: %v", err)
	}
	tbl := out.Table
	if got := keys(tbl.KeySchema); got != "pk HASH, sk RANGE" {
		t.Errorf("key schema = %s", got)
	}
	if tbl.BillingModeSummary == nil || tbl.BillingModeSummary.BillingMode != dt.BillingModePayPerRequest {
		t.Errorf("billing mode = %+v, want PAY_PER_REQUEST", tbl.BillingModeSummary)
	}
	// The due index is items of the table (shared/aws/dynamo/duelist.go).
	if len(tbl.GlobalSecondaryIndexes) != 0 {
		t.Errorf("GSIs = %d, want none", len(tbl.GlobalSecondaryIndexes))
	}
	ttl, err := db.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: &st.TableName})
	if err != nil {
		t.Fatalf("DescribeTimeToLive: %v", err)
	}
	if d := ttl.TimeToLiveDescription; d.TimeToLiveStatus != dt.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "ttl" {
		t.Errorf("TTL = %s on %q, want ENABLED on ttl", d.TimeToLiveStatus, aws.ToString(d.AttributeName))
	}
}

func keys(ks []dt.KeySchemaElement) string {
	var parts []string
	for _, k := range ks {
		parts = append(parts, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	return strings.Join(parts, ", ")
}

func checkQueues(t *testing.T, cfg aws.Config, st *stack.Stack) {
	t.Helper()
	q := sqs.NewFromConfig(cfg)
	attrs := func(url string) map[string]string {
		out, err := q.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Fatalf("GetQueueAttributes %s: %v", url, err)
		}
		return out.Attributes
	}
	in, dlq, output := attrs(st.InputQueueURL), attrs(st.InputDLQURL), attrs(st.OutputQueueURL)
	var policy struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     int    `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(in["RedrivePolicy"]), &policy); err != nil {
		t.Fatalf("input queue RedrivePolicy %q: %v", in["RedrivePolicy"], err)
	}
	if policy.DeadLetterTargetArn != dlq["QueueArn"] || policy.MaxReceiveCount != 5 {
		t.Errorf("redrive policy = %+v, want the DLQ %s after 5 receives", policy, dlq["QueueArn"])
	}
	for name, got := range map[string]string{
		"input VisibilityTimeout":       in["VisibilityTimeout"],
		"input MessageRetentionPeriod":  in["MessageRetentionPeriod"],
		"DLQ MessageRetentionPeriod":    dlq["MessageRetentionPeriod"],
		"output MessageRetentionPeriod": output["MessageRetentionPeriod"],
	} {
		want := "1209600"
		if strings.HasSuffix(name, "VisibilityTimeout") {
			want = "360"
		}
		if got != want {
			t.Errorf("%s = %q, want %s", name, got, want)
		}
	}
	if !strings.HasSuffix(st.InputQueueURL, "/"+st.Prefix+"-InputQueue") {
		t.Errorf("input queue URL %s does not end in /%s-InputQueue", st.InputQueueURL, st.Prefix)
	}
}

// checkParams checks that only the overrides were written to SSM, as an
// operator would set them, and that the functions' own loader reads the
// defaults for the rest.
func checkParams(t *testing.T, cfg aws.Config, st *stack.Stack, set map[string]string) {
	t.Helper()
	if st.ParamPath != "/urldownloader/"+st.Stage+"/" {
		t.Errorf("ParamPath = %q, want /urldownloader/%s/", st.ParamPath, st.Stage)
	}
	got, err := ssmparams.New(ssm.NewFromConfig(cfg), st.ParamPath).Load(t.Context())
	if err != nil {
		t.Fatalf("load parameters under %s: %v", st.ParamPath, err)
	}
	if !maps.Equal(got, set) {
		t.Errorf("parameters under %s = %v, want only the overrides %v", st.ParamPath, got, set)
	}
	want := params.Defaults().Format()
	maps.Copy(want, set)
	if !maps.Equal(st.Params, want) {
		t.Errorf("Stack.Params = %v, want the defaults with the overrides %v", st.Params, want)
	}
	// A missing parameter means its default: the functions' cache loads
	// (an empty path is a successful read) and serves what Params says.
	cache := params.NewCache(ssmparams.New(ssm.NewFromConfig(cfg), st.ParamPath), time.Second, nil, nil)
	if err := cache.WaitLoaded(t.Context()); err != nil {
		t.Fatalf("WaitLoaded: %v", err)
	}
	if inForce := cache.Get(t.Context()).Format(); !maps.Equal(inForce, want) {
		t.Errorf("parameters in force = %v, want %v", inForce, want)
	}
}

func checkFunctions(t *testing.T, st *stack.Stack, shards int) {
	t.Helper()
	env := st.Env()
	want := map[string]string{
		"TABLE_NAME":               st.TableName,
		"OUTPUT_QUEUE_URL":         st.OutputQueueURL,
		"INPUT_QUEUE_URL":          st.InputQueueURL,
		"PARAM_PATH":               st.ParamPath,
		"SHARD_COUNT":              fmt.Sprint(shards),
		"ALLOW_PRIVATE_NETWORKS":   "false",
		"LOG_LEVEL":                "info",
		"CHECK_RUN_SECONDS":        "55",
		"WAKE_QUEUE_URL":           st.WakeEventSource.QueueURL,
		"BODY_BUCKET":              st.BodyBucket,
		"BODY_RETENTION_DAYS":      "14",
		"WARC_OUTPUT":              "false",
		"OUTPUT_MAX_MESSAGE_BYTES": "262144",
		"EPHEMERAL_STORAGE_MB":     "512",
	}
	if !maps.Equal(env, want) {
		t.Errorf("Env() =\n%v\nwant\n%v", env, want)
	}
	if _, ok := st.Functions[stack.IngestFunction].Env["CHECK_RUN_SECONDS"]; ok {
		t.Error("IngestFunction has CHECK_RUN_SECONDS: only CheckFunction should")
	}
	if _, ok := st.Functions[stack.IngestFunction].Env["BODY_BUCKET"]; ok {
		t.Error("IngestFunction has BODY_BUCKET: only CheckFunction stores bodies")
	}
	if _, ok := st.Functions[stack.CheckFunction].Env["WAKE_QUEUE_URL"]; ok {
		t.Error("CheckFunction has WAKE_QUEUE_URL: only IngestFunction sends wake-ups")
	}
	// The functions' own reader accepts the template's environment.
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Errorf("config.FromEnv(Env()): %v", err)
	} else if cfg.ShardCount != shards || cfg.CheckRun != 55*time.Second {
		t.Errorf("config.FromEnv(Env()) = ShardCount %d, CheckRun %v", cfg.ShardCount, cfg.CheckRun)
	}
	if f := st.Functions[stack.IngestFunction]; f.Timeout != time.Minute || f.MemorySize != 256 {
		t.Errorf("ingest: timeout %v, memory %d; want 1m, 256", f.Timeout, f.MemorySize)
	}
	if f := st.Functions[stack.CheckFunction]; f.Timeout != 2*time.Minute || f.MemorySize != 512 || f.EphemeralStorageMB != 512 {
		t.Errorf("check: timeout %v, memory %d, /tmp %d MiB; want 2m, 512, 512", f.Timeout, f.MemorySize, f.EphemeralStorageMB)
	}
	wantESM := stack.EventSourceMapping{
		Function: stack.IngestFunction, QueueURL: st.InputQueueURL,
		BatchSize: 10000, MaximumBatchingWindowInSeconds: 5, ReportBatchItemFailures: true,
		MaxReceiveCount: 5, DLQURL: st.InputDLQURL, MaximumConcurrency: 10,
	}
	if st.IngestEventSource != wantESM {
		t.Errorf("IngestEventSource = %+v\nwant %+v", st.IngestEventSource, wantESM)
	}
	wake, ok := st.Resources["WakeQueue"]
	if !ok || wake.Ref == "" {
		t.Fatalf("no WakeQueue resource: %+v", st.Resources)
	}
	wantWake := stack.EventSourceMapping{Function: stack.CheckFunction, QueueURL: wake.Ref, BatchSize: 1, MaximumConcurrency: max(2, shards)}
	if st.WakeEventSource != wantWake {
		t.Errorf("WakeEventSource = %+v\nwant %+v", st.WakeEventSource, wantWake)
	}
	if st.ShardCount != shards || len(st.Schedules) != shards {
		t.Fatalf("ShardCount %d, %d schedules; want %d of each", st.ShardCount, len(st.Schedules), shards)
	}
	for i, s := range st.Schedules {
		var in struct{ Shard *int }
		if err := json.Unmarshal([]byte(s.Input), &in); err != nil || in.Shard == nil || *in.Shard != i {
			t.Errorf("schedule %d input %q, want {\"shard\": %d}", i, s.Input, i)
		}
		if s.Function != stack.CheckFunction || s.Every != time.Minute || s.Rule != fmt.Sprintf("CheckShard%dSchedule", i) {
			t.Errorf("schedule %d = %+v", i, s)
		}
	}
}

func loadTemplate(t *testing.T) *stack.Template {
	t.Helper()
	tpl, err := stack.Load("")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return tpl
}

// TestDeployIsRepeatable: a local runner may deploy again with the same
// prefix on a long-lived server; nothing is lost and overrides apply.
func TestDeployIsRepeatable(t *testing.T) {
	first, cfg := stack.DeployForTest(t, stack.Options{})
	db := dynamodb.NewFromConfig(cfg)
	item := map[string]dt.AttributeValue{"pk": &dt.AttributeValueMemberS{Value: "h#keep"}, "sk": &dt.AttributeValueMemberS{Value: "h"}}
	if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &first.TableName, Item: item}); err != nil {
		t.Fatal(err)
	}
	again, _ := stack.DeployForTest(t, stack.Options{Prefix: first.Prefix, ParamOverrides: map[string]string{"PersistLimit": "7"}})
	if again.TableName != first.TableName || again.InputQueueURL != first.InputQueueURL {
		t.Errorf("redeploy changed names: %+v vs %+v", again, first)
	}
	// A consistent read: an eventually consistent one may miss a write
	// of the last second (on AWS and under the strict layer).
	out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &first.TableName, Key: item, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Errorf("item lost on redeploy: %v", err)
	}
	p, err := ssm.NewFromConfig(cfg).GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String(again.ParamPath + "PersistLimit")})
	if err != nil || aws.ToString(p.Parameter.Value) != "7" {
		t.Errorf("PersistLimit after redeploy: %v %v, want 7", p, err)
	}
}

// TestParamOverrideUnknownToTheCode: an override is put under the path
// whatever its name, so a test can set a parameter the code reads before
// params knows it (the functions' cache reports it as unknown).
func TestParamOverrideUnknownToTheCode(t *testing.T) {
	st, cfg := stack.DeployForTest(t, stack.Options{ParamOverrides: map[string]string{"NotYetKnown": "7"}})
	p, err := ssm.NewFromConfig(cfg).GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String(st.ParamPath + "NotYetKnown")})
	if err != nil || aws.ToString(p.Parameter.Value) != "7" {
		t.Fatalf("NotYetKnown: %v", err)
	}
	if st.Params["NotYetKnown"] != "7" {
		t.Errorf("Stack.Params lacks the extra parameter: %v", st.Params)
	}
}

func TestDeployRefusesBadOptions(t *testing.T) {
	srv := moto.Shared(t)
	cfg, err := moto.AWSConfig(t.Context(), srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	tpl := loadTemplate(t)
	for name, opts := range map[string]stack.Options{
		"no prefix":           {},
		"prefix with a dot":   {Prefix: "a.b"},
		"shard count 17":      {Prefix: stack.UniquePrefix("bad"), ShardCount: 17},
		"stage with capitals": {Prefix: stack.UniquePrefix("bad"), Stage: "Prod"},
		"unknown parameter":   {Prefix: stack.UniquePrefix("bad"), TemplateParams: map[string]string{"Nope": "1"}},
		"batch size 0":        {Prefix: stack.UniquePrefix("bad"), TemplateParams: map[string]string{"IngestBatchSize": "0"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := tpl.Deploy(t.Context(), cfg, opts); err == nil {
				t.Error("Deploy succeeded")
			}
		})
	}
}

// TestDeployRefusesStackOwnedParameters: a template that creates an SSM
// parameter would reset an operator's value on deploy; the local stack
// refuses it rather than create it.
func TestDeployRefusesStackOwnedParameters(t *testing.T) {
	srv := moto.Shared(t)
	cfg, err := moto.AWSConfig(t.Context(), srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := stack.Parse([]byte(`
Resources:
  P:
    Type: AWS::SSM::Parameter
    Properties: {Name: /urldownloader/x/FetchDelay, Type: String, Value: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tpl.Deploy(t.Context(), cfg, stack.Options{Prefix: stack.UniquePrefix("ssm")})
	if err == nil || !strings.Contains(err.Error(), "operators") {
		t.Errorf("Deploy error = %v, want a refusal of the stack-owned parameter", err)
	}
}

// TestDeployRefusesUnknownProperties: a property the local stack cannot
// create must fail loudly, or the local and deployed stacks would drift.
func TestDeployRefusesUnknownProperties(t *testing.T) {
	srv := moto.Shared(t)
	cfg, err := moto.AWSConfig(t.Context(), srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := stack.Parse([]byte(`
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      RedriveAllowPolicy: {redrivePermission: denyAll}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tpl.Deploy(t.Context(), cfg, stack.Options{Prefix: stack.UniquePrefix("unknown")})
	if err == nil || !strings.Contains(err.Error(), "RedriveAllowPolicy") {
		t.Errorf("Deploy error = %v, want one naming RedriveAllowPolicy", err)
	}
}

func TestTemplateParameters(t *testing.T) {
	var names []string
	for _, p := range loadTemplate(t).Parameters() {
		names = append(names, p.Name)
	}
	for _, want := range []string{"Stage", "ShardCount", "IngestBatchSize", "IngestBatchingWindowSeconds"} {
		if !slices.Contains(names, want) {
			t.Errorf("template parameters %v lack %s", names, want)
		}
	}
}
