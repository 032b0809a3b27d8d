package main

import (
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// TestHeadlineConfigs holds the headline's steps to what the page says the
// recommended configuration is: a rejected step is measured on the taken
// steps before it and does not carry into the ones after it, and the last
// taken step is the configuration the README names.
func TestHeadlineConfigs(t *testing.T) {
	base := Defaults()
	base.ShardCount, base.CheckMemoryMB = 16, headlineMemoryMB
	cs := headlineConfigs(base)
	if len(cs) != len(headlineSteps) {
		t.Fatalf("%d configurations for %d steps", len(cs), len(headlineSteps))
	}
	var last Config
	for i, st := range headlineSteps {
		if st.Rejected == "" {
			last = cs[i]
		} else if i+1 < len(cs) && cs[i+1].ShardCount != last.ShardCount {
			t.Errorf("step %d follows the rejected step %d", i+1, i)
		}
	}
	if cs[0].P.ResultBodyEncoding != params.BodyPlain {
		t.Errorf("the first step's bodies are %s, want plain", cs[0].P.ResultBodyEncoding)
	}
	if last.ShardCount != 16 || last.CheckMemoryMB != 512 || last.TableTarget != 80 ||
		last.P.ResultBodyEncoding != params.BodyGzip || last.URLsPerMessage != 10 {
		t.Errorf("recommended: ShardCount %d, %d MB, target %d%%, bodies %s, %d URLs a message; the README says 16, 512, 80%%, gzip, 10",
			last.ShardCount, last.CheckMemoryMB, last.TableTarget, last.P.ResultBodyEncoding, last.URLsPerMessage)
	}
	for _, c := range cs {
		if c.Layout != base.Layout || c.PerDay != base.PerDay {
			t.Errorf("%s: a step changed the layout or the load", c.Name)
		}
	}
}
