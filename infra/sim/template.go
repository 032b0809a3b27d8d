package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/urldownloader/urldownloader/infra/stack"
)

// fromTemplate sets the deployment's settings from template.yaml, as the
// local stack does, so the simulated deployment cannot drift from the real
// one: the parameters' defaults (ShardCount, IngestBatchSize,
// IngestBatchingWindowSeconds, IngestMaxConcurrency), the functions'
// timeouts and memory, the check run's length, the wake mapping's batch
// size and concurrency, the input queue's visibility timeout and
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
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return err
	}
	var missing []string
	num := func(dst *int, keys ...string) {
		n := find(&root, keys...)
		if n == nil {
			missing = append(missing, strings.Join(keys, "."))
			return
		}
		v := n.Value
		if n.Tag == "!Ref" {
			v = params[v]
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
	secs(&c.IngestWindow, "Parameters", "IngestBatchingWindowSeconds", "Default")
	num(&c.IngestMaxConc, "Resources", "IngestFunction", "Properties", "Events", "InputQueue", "Properties", "ScalingConfig", "MaximumConcurrency")
	secs(&c.IngestTimeout, "Resources", "IngestFunction", "Properties", "Timeout")
	num(&c.IngestMemoryMB, "Resources", "IngestFunction", "Properties", "MemorySize")
	secs(&c.CheckTimeout, "Resources", "CheckFunction", "Properties", "Timeout")
	num(&c.CheckMemoryMB, "Resources", "CheckFunction", "Properties", "MemorySize")
	secs(&c.CheckRun, "Resources", "CheckFunction", "Properties", "Environment", "Variables", "CHECK_RUN_SECONDS")
	num(&c.WakeBatchSize, "Resources", "CheckFunction", "Properties", "Events", "Wake", "Properties", "BatchSize")
	num(&c.WakeMaxConc, "Resources", "CheckFunction", "Properties", "Events", "Wake", "Properties", "ScalingConfig", "MaximumConcurrency")
	secs(&c.VisibilityTimout, "Resources", "InputQueue", "Properties", "VisibilityTimeout")
	num(&c.MaxReceiveCount, "Resources", "InputQueue", "Properties", "RedrivePolicy", "maxReceiveCount")
	if len(missing) > 0 {
		return fmt.Errorf("%s: not read: %s", path, strings.Join(missing, ", "))
	}
	return nil
}

// find walks mapping keys from the document root.
func find(n *yaml.Node, keys ...string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, k := range keys {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}
