package stack

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
)

// The operations side of template.yaml: log groups, invocation settings,
// table protection, alarms and the dashboard. None of it exists locally,
// so these tests read the template itself, evaluated as CloudFormation
// would with every resource standing in for its physical one.

// deployed evaluates tpl's intrinsic functions with the given parameter
// overrides; every resource's Ref is "ref-<id>" and its attributes
// "<attr>-<id>".
func deployed(t *testing.T, tpl *Template, overrides map[string]string) *evaluator {
	t.Helper()
	params, err := tpl.resolveParams(overrides)
	if err != nil {
		t.Fatalf("parameters %v: %v", overrides, err)
	}
	created := map[string]physical{}
	for id, r := range tpl.resources {
		created[id] = physical{Type: r.Type, Ref: "ref-" + id, Attrs: map[string]string{
			"Arn": "Arn-" + id, "QueueName": "QueueName-" + id, "QueueUrl": "ref-" + id,
		}}
	}
	return &evaluator{t: tpl, params: params, created: created, stackName: "urldownloader-test"}
}

// props returns a resource's evaluated properties.
func (e *evaluator) props(t *testing.T, id string) map[string]any {
	t.Helper()
	r, ok := e.t.resources[id]
	if !ok {
		t.Fatalf("template has no %s", id)
	}
	p, err := e.eval(r.Properties)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return p.(map[string]any)
}

// ofFunction returns the logical id of the one resource of type typ whose
// FunctionName refers to fn: the translator makes a SAM function's
// EventInvokeConfig and SQS event resources of their own.
func ofFunction(t *testing.T, tpl *Template, typ, fn string) string {
	t.Helper()
	var ids []string
	for _, id := range tpl.order {
		if r := tpl.resources[id]; r.Type == typ && functionOf(r.Properties["FunctionName"]) == fn {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("%s of %s: %v, want one", typ, fn, ids)
	}
	return ids[0]
}

// at walks a path of map keys and list indexes ("Events.InputQueue.0").
func at(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any) string {
	if v == nil {
		return "<nil>"
	}
	return scalar(v)
}

func TestFunctionsLogAsJSONToGroupsWithRetention(t *testing.T) {
	tpl := loadTemplate(t)
	e := deployed(t, tpl, map[string]string{"LogRetentionDays": "14", "ApplicationLogLevel": "DEBUG"})
	groups := map[string]bool{}
	for _, fn := range []string{IngestFunction, CheckFunction} {
		p := e.props(t, fn)
		for path, want := range map[string]string{
			"LoggingConfig.LogFormat":           "JSON",
			"LoggingConfig.ApplicationLogLevel": "DEBUG",
		} {
			if got := str(at(p, path)); got != want {
				t.Errorf("%s %s = %s, want %s", fn, path, got, want)
			}
		}
		group := strings.TrimPrefix(str(at(p, "LoggingConfig.LogGroup")), "ref-")
		r, ok := tpl.resources[group]
		if !ok || r.Type != "AWS::Logs::LogGroup" {
			t.Errorf("%s logs to %q, not a log group of the template", fn, group)
			continue
		}
		if groups[group] {
			t.Errorf("%s shares log group %s", fn, group)
		}
		groups[group] = true
		if got := str(at(e.props(t, group), "RetentionInDays")); got != "14" {
			t.Errorf("%s RetentionInDays = %s, want the LogRetentionDays parameter", group, got)
		}
	}
	if p := tpl.params["LogRetentionDays"]; p.Default != "30" {
		t.Errorf("LogRetentionDays default %s, want 30", p.Default)
	}
	// Lambda files a JSON line without a level (every EMF document) at
	// INFO: a higher level would drop the metrics.
	if p := tpl.params["ApplicationLogLevel"]; p.Check("WARN") == nil || p.Check("ERROR") == nil || p.Default != "INFO" {
		t.Errorf("ApplicationLogLevel %+v: want default INFO and WARN, ERROR refused", p)
	}
}

func TestCheckIsNotRetriedAsynchronously(t *testing.T) {
	tpl := loadTemplate(t)
	e := deployed(t, tpl, nil)
	p := e.props(t, ofFunction(t, tpl, "AWS::Lambda::EventInvokeConfig", CheckFunction))
	if got := str(at(p, "MaximumRetryAttempts")); got != "0" {
		t.Errorf("MaximumRetryAttempts = %s, want 0: the next schedule is the retry", got)
	}
	age, err := strconv.Atoi(str(at(p, "MaximumEventAgeInSeconds")))
	if err != nil || age < 60 || age > 120 {
		t.Errorf("MaximumEventAgeInSeconds = %v, want 60..120 (about one schedule period)", at(p, "MaximumEventAgeInSeconds"))
	}
}

func TestInputMappingHasMaximumConcurrency(t *testing.T) {
	tpl := loadTemplate(t)
	e := deployed(t, tpl, map[string]string{"IngestMaxConcurrency": "7"})
	p := e.props(t, ofFunction(t, tpl, "AWS::Lambda::EventSourceMapping", IngestFunction))
	if got := str(at(p, "ScalingConfig.MaximumConcurrency")); got != "7" {
		t.Errorf("input mapping MaximumConcurrency = %s, want the IngestMaxConcurrency parameter", got)
	}
	// SQS event source mappings refuse fewer than 2.
	if p := tpl.params["IngestMaxConcurrency"]; p.Check("1") == nil || p.Check("2") != nil {
		t.Errorf("IngestMaxConcurrency bounds %+v: want at least 2", p)
	}
}

// TestWakeConcurrencyFollowsShards: wake-ups run one shard each and a
// shard has one holder, so the wake queue's mapping runs at most
// ShardCount invocations (Lambda's least is 2, its most 1,000) and cannot
// take the account's concurrency.
func TestWakeConcurrencyFollowsShards(t *testing.T) {
	tpl := loadTemplate(t)
	id := ofFunction(t, tpl, "AWS::Lambda::EventSourceMapping", CheckFunction)
	for _, count := range tpl.params["ShardCount"].AllowedValues {
		e := deployed(t, tpl, map[string]string{"ShardCount": count})
		n, _ := strconv.Atoi(count)
		if got, want := str(at(e.props(t, id), "ScalingConfig.MaximumConcurrency")), strconv.Itoa(max(2, n)); got != want {
			t.Errorf("ShardCount %d: wake MaximumConcurrency %s, want %s", n, got, want)
		}
	}
}

func TestTableIsProtectedInProd(t *testing.T) {
	tpl := loadTemplate(t)
	table := tpl.resources[HostsTable]
	for _, tc := range []struct {
		name      string
		overrides map[string]string
		protected bool
	}{
		{"dev", map[string]string{"Stage": "dev"}, false},
		{"prod", map[string]string{"Stage": "prod"}, true},
		{"dev with ProtectData", map[string]string{"Stage": "dev", "ProtectData": "true"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := deployed(t, tpl, tc.overrides)
			del, err := e.str(table.DeletionPolicy)
			if err != nil {
				t.Fatalf("DeletionPolicy: %v", err)
			}
			replace, err := e.str(table.UpdateReplacePolicy)
			if err != nil {
				t.Fatalf("UpdateReplacePolicy: %v", err)
			}
			wantDel := map[bool]string{true: "Retain", false: "Delete"}[tc.protected]
			if del != wantDel || replace != "Retain" {
				t.Errorf("DeletionPolicy %s, UpdateReplacePolicy %s; want %s, Retain", del, replace, wantDel)
			}
			if got := str(at(e.props(t, HostsTable), "DeletionProtectionEnabled")); got != strconv.FormatBool(tc.protected) {
				t.Errorf("DeletionProtectionEnabled = %s, want %v", got, tc.protected)
			}
		})
	}
}

// alarm is what one alarm must watch.
type alarm struct {
	namespace, metric, dimension string
	// threshold is the parameter holding it; "" for a fixed 0.
	threshold string
}

func TestAlarms(t *testing.T) {
	tpl := loadTemplate(t)
	e := deployed(t, tpl, map[string]string{"AlarmTopicArn": "arn:topic"})
	want := map[string]alarm{
		"InputDLQDepthAlarm":    {"AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName-InputDLQ", ""},
		"OutputQueueAgeAlarm":   {"AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName-OutputQueue", "OutputQueueAgeAlarmSeconds"},
		"InputQueueAgeAlarm":    {"AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName-InputQueue", "InputQueueAgeAlarmSeconds"},
		"CheckErrorsAlarm":      {"AWS/Lambda", "Errors", "ref-CheckFunction", ""},
		"CheckThrottlesAlarm":   {"AWS/Lambda", "Throttles", "ref-CheckFunction", ""},
		"CheckNearTimeoutAlarm": {"AWS/Lambda", "Duration", "ref-CheckFunction", ""},
		"IngestErrorsAlarm":     {"AWS/Lambda", "Errors", "ref-IngestFunction", ""},
		"IngestThrottlesAlarm":  {"AWS/Lambda", "Throttles", "ref-IngestFunction", ""},
		"ApiServerErrorsAlarm":  {"AWS/ApiGateway", "5XXError", "urldownloader-test-urls", ""},
		"TableThrottlesAlarm":   {"AWS/DynamoDB", "", "ref-HostsTable", ""},
	}
	var found []string
	for _, id := range tpl.order {
		if tpl.resources[id].Type == "AWS::CloudWatch::Alarm" {
			found = append(found, id)
		}
	}
	for id := range want {
		if !slices.Contains(found, id) {
			t.Errorf("no alarm %s", id)
		}
	}
	for _, id := range found {
		w, ok := want[id]
		if !ok {
			t.Errorf("alarm %s is not tested here (nor, perhaps, in docs/deploying.md's Alarms)", id)
			continue
		}
		p := e.props(t, id)
		if got := str(at(p, "AlarmActions.0")); got != "arn:topic" {
			t.Errorf("%s AlarmActions = %v, want the AlarmTopicArn", id, at(p, "AlarmActions"))
		}
		if w.metric != "" && (str(p["Namespace"]) != w.namespace || str(p["MetricName"]) != w.metric) {
			t.Errorf("%s watches %s %s, want %s %s", id, p["Namespace"], p["MetricName"], w.namespace, w.metric)
		}
		if w.metric != "" && str(at(p, "Dimensions.0.Value")) != w.dimension {
			t.Errorf("%s dimension %v, want %s", id, at(p, "Dimensions"), w.dimension)
		}
		if w.threshold != "" && str(p["Threshold"]) != tpl.params[w.threshold].Default {
			t.Errorf("%s Threshold = %v, want the %s parameter", id, p["Threshold"], w.threshold)
		}
	}
	// The table alarm adds up the table's read and write throttles.
	var watched []string
	for _, m := range at(e.props(t, "TableThrottlesAlarm"), "Metrics").([]any) {
		if ms := at(m, "MetricStat.Metric"); ms != nil {
			watched = append(watched, str(at(ms, "MetricName"))+"/"+str(at(ms, "Dimensions.1.Value")))
		}
	}
	slices.Sort(watched)
	if want := []string{"ReadThrottleEvents/<nil>", "WriteThrottleEvents/<nil>"}; !slices.Equal(watched, want) {
		t.Errorf("TableThrottlesAlarm watches %v, want %v", watched, want)
	}
	// The output alarm must fire well before results expire unread.
	retention, _ := strconv.Atoi(str(at(e.props(t, OutputQueue), "MessageRetentionPeriod")))
	p := tpl.params["OutputQueueAgeAlarmSeconds"]
	def, _ := strconv.Atoi(p.Default)
	if def > 86400 || p.MaxValue == nil || int(*p.MaxValue) > retention-86400 {
		t.Errorf("OutputQueueAgeAlarmSeconds default %d, max %v: want at most a day, and at least a day inside the %d s retention", def, p.MaxValue, retention)
	}
	// Without a topic the alarms exist without actions.
	if got := at(deployed(t, tpl, nil).props(t, "OutputQueueAgeAlarm"), "AlarmActions"); got != nil {
		t.Errorf("AlarmActions without a topic = %v", got)
	}
}

var searchMetric = regexp.MustCompile(`MetricName="([A-Za-z]+)"`)

func TestDashboard(t *testing.T) {
	tpl := loadTemplate(t)
	e := deployed(t, tpl, map[string]string{"Stage": "prod"})
	body := str(e.props(t, "Dashboard")["DashboardBody"])
	var dash struct {
		Widgets []struct {
			Type       string
			Properties struct {
				Title   string
				Alarms  []string
				Metrics [][]any
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &dash); err != nil {
		t.Fatalf("DashboardBody is not JSON: %v\n%s", err, body)
	}
	custom := map[string]bool{}
	var services []string
	var alarms []string
	for _, w := range dash.Widgets {
		alarms = append(alarms, w.Properties.Alarms...)
		for _, m := range w.Properties.Metrics {
			if len(m) == 0 {
				continue
			}
			if expr, ok := m[0].(map[string]any); ok {
				for _, sm := range searchMetric.FindAllStringSubmatch(str(expr["expression"]), -1) {
					custom[sm[1]] = true
				}
				if !strings.Contains(str(expr["expression"]), `Stage="prod"`) {
					t.Errorf("%q: expression %v not limited to the stage", w.Properties.Title, expr["expression"])
				}
				continue
			}
			ns, name := str(m[0]), str(m[1])
			if ns == metrics.Namespace {
				custom[name] = true
				if str(m[2]) != "Stage" || str(m[3]) != "prod" {
					t.Errorf("%q: %s without the Stage dimension: %v", w.Properties.Title, name, m)
				}
				continue
			}
			services = append(services, ns+" "+name+" "+str(m[3]))
		}
	}
	for name := range custom {
		if _, ok := metrics.Lookup(name); !ok {
			t.Errorf("dashboard shows %s, which shared/runtime/metrics does not define", name)
		}
	}
	for _, m := range metrics.All() {
		if !custom[m.Name] {
			t.Errorf("metric %s is not on the dashboard", m.Name)
		}
	}
	for _, want := range []string{
		"AWS/SQS ApproximateAgeOfOldestMessage QueueName-InputQueue",
		"AWS/SQS ApproximateAgeOfOldestMessage QueueName-OutputQueue",
		"AWS/SQS ApproximateAgeOfOldestMessage QueueName-InputDLQ",
		"AWS/SQS ApproximateNumberOfMessagesVisible QueueName-InputQueue",
		"AWS/SQS ApproximateNumberOfMessagesVisible QueueName-OutputQueue",
		"AWS/SQS ApproximateNumberOfMessagesVisible QueueName-InputDLQ",
		"AWS/DynamoDB ConsumedReadCapacityUnits ref-HostsTable",
		"AWS/DynamoDB ConsumedWriteCapacityUnits ref-HostsTable",
		"AWS/DynamoDB ReadThrottleEvents ref-HostsTable",
		"AWS/DynamoDB WriteThrottleEvents ref-HostsTable",
		"AWS/Lambda Duration ref-CheckFunction",
		"AWS/Lambda Duration ref-IngestFunction",
		"AWS/Lambda ConcurrentExecutions ref-CheckFunction",
		"AWS/Lambda ConcurrentExecutions ref-IngestFunction",
		"AWS/Lambda Errors ref-CheckFunction",
		"AWS/Lambda Errors ref-IngestFunction",
		"AWS/Lambda Throttles ref-CheckFunction",
		"AWS/Lambda Throttles ref-IngestFunction",
		"AWS/ApiGateway 5XXError urldownloader-test-urls",
	} {
		if !slices.Contains(services, want) {
			t.Errorf("dashboard lacks %s", want)
		}
	}
	for _, id := range tpl.order {
		if tpl.resources[id].Type == "AWS::CloudWatch::Alarm" && !slices.Contains(alarms, "Arn-"+id) {
			t.Errorf("alarm %s is not on the dashboard's alarm widget", id)
		}
	}
}
