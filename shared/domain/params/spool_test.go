package params

import (
	"fmt"
	"strings"
	"testing"
)

// TestCacheLimitSpool: with WarcOutput, a MaxBodyBytes whose spools (2 x
// MaxBodyBytes a worker) and the margin do not fit in the function's /tmp
// is refused at every load, with an error naming the parameter, the
// workers, the budget and both remedies; the last good value stays, and
// before any good one the largest that fits.
func TestCacheLimitSpool(t *testing.T) {
	const mib = 1 << 20
	f := newFixture(MaxTTL)
	workers := func(p Params) int {
		if p.MaxBodyBytes < 256<<10 {
			return 300 // smaller bodies, more workers in the same memory
		}
		return 198
	}
	// 512 MiB of /tmp: 198 x 2 x 10 MiB does not fit.
	f.cache.LimitSpool(512*mib, workers)
	largest := int64((512*mib - SpoolMargin) / (2 * 198))
	if got := f.cache.Get(t.Context()).MaxBodyBytes; got != largest {
		t.Fatalf("MaxBodyBytes in force = %d, want the largest that fits, %d", got, largest)
	}
	errs := f.logs.errors(t)
	if len(errs) == 0 {
		t.Fatal("the default that does not fit was not logged")
	}
	msg := errs[len(errs)-1]["invalid"]
	for _, want := range []string{"MaxBodyBytes", "198 host workers", "2 x MaxBodyBytes", "above the function's 512 MiB",
		"EPHEMERAL_STORAGE_MB", "EphemeralStorage to at least 4024", fmt.Sprintf("at most %d,", largest)} {
		if !strings.Contains(fmt.Sprint(msg), want) {
			t.Errorf("refusal %v does not say %q", msg, want)
		}
	}

	// A value that fits is taken; one that does not is refused at each
	// load and the last good one kept.
	f.loader.returns(map[string]string{NameMaxBodyBytes: "1000000"}, nil)
	f.clock.Advance(MaxTTL)
	if got := f.cache.Get(t.Context()).MaxBodyBytes; got != 1000000 {
		t.Fatalf("MaxBodyBytes = %d, want the 1000000 set, which fits", got)
	}
	f.loader.returns(map[string]string{NameMaxBodyBytes: "5000000"}, nil)
	for load := 1; load <= 2; load++ {
		before := len(f.logs.errors(t))
		f.clock.Advance(MaxTTL)
		if got := f.cache.Get(t.Context()).MaxBodyBytes; got != 1000000 {
			t.Fatalf("load %d: MaxBodyBytes = %d, want the last good 1000000", load, got)
		}
		if errs := f.logs.errors(t); len(errs) != before+1 || !strings.Contains(fmt.Sprint(errs[len(errs)-1]["invalid"]), "5000000") {
			t.Errorf("load %d: the refusal of 5000000 was not logged once", load)
		}
	}

	// Enough /tmp: the default fits.
	g := newFixture(MaxTTL)
	g.cache.LimitSpool(10240*mib, workers)
	if got := g.cache.Get(t.Context()).MaxBodyBytes; got != DefaultMaxBodyBytes {
		t.Errorf("MaxBodyBytes with 10 GiB of /tmp = %d, want the default", got)
	}
	if errs := g.logs.errors(t); len(errs) != 0 {
		t.Errorf("refusals with 10 GiB of /tmp: %v", errs)
	}
}
