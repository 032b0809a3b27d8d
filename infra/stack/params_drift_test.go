package stack_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/urldownloader/urldownloader/infra/stack"
	"github.com/urldownloader/urldownloader/shared/params"
)

// TestTemplateParamsMatchCode: the template creates every runtime parameter
// the code reads, with the code's own default, so a fresh deployment runs
// with documented values and nothing falls back silently.
func TestTemplateParamsMatchCode(t *testing.T) {
	tpl, err := stack.Load("")
	if err != nil {
		t.Fatal(err)
	}
	got := tpl.ParamDefaults()
	want := params.Defaults().Format()
	if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)); !slices.Equal(g, w) {
		t.Fatalf("template parameters %v, code parameters %v", g, w)
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s: template default %q, code default %q", name, got[name], v)
		}
	}
}
