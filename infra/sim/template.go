package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/internal/stack"
)

// fromTemplate sets the deployment's settings from template.yaml as the
// SAM translator expands it (see stack.Template.Lookup), as the local
// stack does, so the simulated deployment cannot drift from the real one:
// the parameters' defaults (ShardCount, IngestBatchSize,
// IngestBatchingWindowSeconds, IngestMaxConcurrency, the provisioned
// capacity mode's target and bounds), the functions'
// timeouts and memory, the check run's length, the wake mapping's batch
// size and concurrency (by the default ShardCount), the input queue's visibility timeout and
// maxReceiveCount. It returns what it could not read.
func fromTemplate(c *Config) error {
	path, err := stack.FindTemplate()
	if err != nil {
		return err
	}
	t, err := stack.Load(path)
	if err != nil {
		return err
	}
	params := map[string]string{}
	for _, p := range t.Parameters() {
		params[p.Name] = p.Default
	}
	var missing []string
	num := func(dst *int, keys ...string) {
		var v string
		switch x := t.Lookup(keys...).(type) {
		case string:
			v = x
		case float64:
			v = strconv.FormatFloat(x, 'f', -1, 64)
		case map[string]any:
			ref, _ := x["Ref"].(string)
			v = params[ref]
			// [Map, {"Ref": Parameter}, Key]: the wake concurrency by ShardCount.
			if in, ok := x["Fn::FindInMap"].([]any); ok && len(in) == 3 {
				m, _ := in[0].(string)
				top, _ := in[1].(map[string]any)
				ref, _ := top["Ref"].(string)
				key, _ := in[2].(string)
				if f, ok := t.Lookup("Mappings", m, params[ref], key).(float64); ok {
					v = strconv.FormatFloat(f, 'f', -1, 64)
				}
			}
		default:
			missing = append(missing, strings.Join(keys, "."))
			return
		}
		i, err := strconv.Atoi(v)
		if err != nil {
			missing = append(missing, strings.Join(keys, ".")+"="+v)
			return
		}
		*dst = i
	}
	secs := func(dst *time.Duration, keys ...string) {
		var i int
		num(&i, keys...)
		if i > 0 {
			*dst = time.Duration(i) * time.Second
		}
	}
	num(&c.ShardCount, "Parameters", "ShardCount", "Default")
	num(&c.IngestBatchSize, "Parameters", "IngestBatchSize", "Default")
	num(&c.TableTarget, "Parameters", "TableTargetUtilization", "Default")
	num(&c.TableMinR, "Parameters", "TableMinReadCapacity", "Default")
	num(&c.TableMaxR, "Parameters", "TableMaxReadCapacity", "Default")
	num(&c.TableMinW, "Parameters", "TableMinWriteCapacity", "Default")
	num(&c.TableMaxW, "Parameters", "TableMaxWriteCapacity", "Default")
	secs(&c.IngestWindow, "Parameters", "IngestBatchingWindowSeconds", "Default")
	num(&c.IngestMaxConc, "Resources", "IngestFunctionInputQueue", "Properties", "ScalingConfig", "MaximumConcurrency")
	secs(&c.IngestTimeout, "Resources", "IngestFunction", "Properties", "Timeout")
	num(&c.IngestMemoryMB, "Resources", "IngestFunction", "Properties", "MemorySize")
	secs(&c.CheckTimeout, "Resources", "CheckFunction", "Properties", "Timeout")
	num(&c.CheckMemoryMB, "Resources", "CheckFunction", "Properties", "MemorySize")
	secs(&c.CheckRun, "Resources", "CheckFunction", "Properties", "Environment", "Variables", "CHECK_RUN_SECONDS")
	num(&c.WakeBatchSize, "Resources", "CheckFunctionWake", "Properties", "BatchSize")
	num(&c.WakeMaxConc, "Resources", "CheckFunctionWake", "Properties", "ScalingConfig", "MaximumConcurrency")
	secs(&c.VisibilityTimout, "Resources", "InputQueue", "Properties", "VisibilityTimeout")
	num(&c.MaxReceiveCount, "Resources", "InputQueue", "Properties", "RedrivePolicy", "maxReceiveCount")
	if len(missing) > 0 {
		return fmt.Errorf("%s: not read: %s", path, strings.Join(missing, ", "))
	}
	return nil
}
