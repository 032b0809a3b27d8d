package stack

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/internal/proc"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// TestRulesRefuseWhatLambdaRefuses: Lambda refuses an SQS event source
// mapping with BatchSize above 10 and MaximumBatchingWindowInSeconds 0
// (CreateEventSourceMapping), after CloudFormation has made the table and
// queues; the template's Rules refuse such parameters before anything is
// made. Every mapping whose two settings come from parameters is covered.
func TestRulesRefuseWhatLambdaRefuses(t *testing.T) {
	tpl := loadTemplate(t)
	for _, tc := range []struct {
		window, batch string
		ok            bool
	}{
		{"0", "10000", false},
		{"0", "11", false},
		{"0", "10", true},
		{"0", "1", true},
		{"1", "10000", true},
		{"5", "11", true},
	} {
		_, err := tpl.resolveParams(map[string]string{"IngestBatchingWindowSeconds": tc.window, "IngestBatchSize": tc.batch})
		if (err == nil) != tc.ok {
			t.Errorf("window %s, batch %s: resolveParams error %v, want ok=%v", tc.window, tc.batch, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "IngestBatchingWindowSeconds") {
			t.Errorf("window %s, batch %s: %v does not name the parameters", tc.window, tc.batch, err)
		}
	}
	if _, err := tpl.resolveParams(nil); err != nil {
		t.Errorf("the defaults break a rule: %v", err)
	}

	// Each SQS mapping: a batch above 10 with no window is refused.
	for _, id := range tpl.order {
		r := tpl.resources[id]
		if r.Type != "AWS::Lambda::EventSourceMapping" {
			continue
		}
		window, batch := r.Properties["MaximumBatchingWindowInSeconds"], r.Properties["BatchSize"]
		wp, _ := mapOf(window)["Ref"].(string)
		batchParam, _ := mapOf(batch)["Ref"].(string)
		if window == nil {
			window = "0" // SQS's default
		}
		overrides := map[string]string{}
		if wp != "" && tpl.params[wp].Check("0") == nil {
			overrides[wp] = "0"
		} else if wp != "" || scalar(window) != "0" {
			continue // the window cannot be 0
		}
		if batchParam != "" && tpl.params[batchParam].Check("11") == nil {
			overrides[batchParam] = "11"
		} else if n, _ := strconv.Atoi(scalar(batch)); batchParam != "" || n <= 10 {
			continue // the batch cannot exceed 10
		} else {
			t.Errorf("%s: a batch of %d with no batching window, which Lambda refuses", id, n)
			continue
		}
		if _, err := tpl.resolveParams(overrides); err == nil {
			t.Errorf("%s: %v passes the Rules; Lambda refuses it", id, overrides)
		}
	}
}

// TestQueuesSetTheirMessageSize: a queue made before 2025 kept SQS's old
// 256 KiB default, and an update does not raise it; ingest accepts input
// messages up to 1 MiB and the sender fills them to the queue's size, so
// the input queue says its size, and the output queue takes the parameter.
func TestQueuesSetTheirMessageSize(t *testing.T) {
	tpl := loadTemplate(t)
	e := deployed(t, tpl, map[string]string{"OutputMaxMessageBytes": "524288"})
	if got, want := str(e.props(t, InputQueue)["MaximumMessageSize"]), strconv.Itoa(urlmsg.MaxPayloadBytes); got != want {
		t.Errorf("input queue MaximumMessageSize %q, want %s (urlmsg.MaxPayloadBytes)", got, want)
	}
	if got := str(e.props(t, OutputQueue)["MaximumMessageSize"]); got != "524288" {
		t.Errorf("output queue MaximumMessageSize %q, want the OutputMaxMessageBytes parameter", got)
	}
}

// TestEphemeralStorage: the check function's /tmp is a parameter within
// Lambda's 512 to 10,240 MiB, and both functions are told its size.
func TestEphemeralStorage(t *testing.T) {
	tpl := loadTemplate(t)
	p, ok := tpl.params["EphemeralStorage"]
	if !ok {
		t.Fatal("no EphemeralStorage parameter")
	}
	if p.Default != "512" || p.Check("511") == nil || p.Check("512") != nil || p.Check("10240") != nil || p.Check("10241") == nil {
		t.Errorf("EphemeralStorage %+v: want default 512, 512 to 10240", p)
	}
	e := deployed(t, tpl, map[string]string{"EphemeralStorage": "2048"})
	if got := str(at(e.props(t, CheckFunction), "EphemeralStorage.Size")); got != "2048" {
		t.Errorf("check function EphemeralStorage.Size %q, want the parameter", got)
	}
	d := &deployer{t: tpl, ev: e}
	for _, fn := range []string{IngestFunction, CheckFunction} {
		env, err := d.functionEnv(tpl.resources[fn].Properties)
		if err != nil {
			t.Fatal(err)
		}
		if env["EPHEMERAL_STORAGE_MB"] != "2048" {
			t.Errorf("%s EPHEMERAL_STORAGE_MB = %q, want the parameter", fn, env["EPHEMERAL_STORAGE_MB"])
		}
	}
}

// TestDeploysUploadTheTemplate: CloudFormation takes a template inline
// (TemplateBody) up to 51,200 bytes and from S3 up to 1 MB
// (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html).
// Above the first, every deploy configuration in samconfig.toml must
// upload it (resolve_s3 or s3_bucket).
func TestDeploysUploadTheTemplate(t *testing.T) {
	tpl := loadTemplate(t)
	if len(tpl.text) <= 51200 {
		t.Skipf("template.yaml is %d bytes: within the inline limit", len(tpl.text))
	}
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "samconfig.toml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	uploads := map[string]bool{} // [env.deploy.parameters] -> uploads
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[] ")
			if strings.HasSuffix(section, ".deploy.parameters") {
				uploads[section] = false
			}
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || !strings.HasSuffix(section, ".deploy.parameters") {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if (key == "resolve_s3" && val == "true") || (key == "s3_bucket" && strings.Trim(val, `"`) != "") {
			uploads[section] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(uploads) == 0 {
		t.Fatal("samconfig.toml has no deploy parameters")
	}
	for section, ok := range uploads {
		if !ok {
			t.Errorf("[%s] neither resolve_s3 = true nor s3_bucket: template.yaml is %d bytes, above CloudFormation's 51,200 inline", section, len(tpl.text))
		}
	}
}
