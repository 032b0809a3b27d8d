package faults_test

import (
	"testing"

	"github.com/urldownloader/urldownloader/infra/faults"
)

func plan(seed int64, rate float64, n int) []bool {
	in := faults.New(seed, rate)
	out := make([]bool, n)
	for i := range out {
		out[i] = in.Fire(faults.DynamoThrottle, 1)
	}
	return out
}

// TestSeedReproducesThePlan: the same seed gives the same decisions, another
// seed others, and the rate is honoured within statistical bounds.
func TestSeedReproducesThePlan(t *testing.T) {
	a, b, c := plan(7, 0.2, 2000), plan(7, 0.2, 2000), plan(8, 0.2, 2000)
	same, fired := true, 0
	differs := false
	for i := range a {
		same = same && a[i] == b[i]
		differs = differs || a[i] != c[i]
		if a[i] {
			fired++
		}
	}
	if !same {
		t.Error("seed 7 gave two different plans")
	}
	if !differs {
		t.Error("seeds 7 and 8 gave the same plan")
	}
	// 2000 draws at 0.2: mean 400, sd ~18; 5 sd either side.
	if fired < 310 || fired > 490 {
		t.Errorf("%d of 2000 fired at rate 0.2", fired)
	}
	for _, f := range plan(7, 0, 500) {
		if f {
			t.Fatal("rate 0 fired")
		}
	}
	for _, f := range plan(7, 1, 500) {
		if !f {
			t.Fatal("rate 1 did not fire")
		}
	}
}

// TestCountsAndNil: fired faults are counted by kind; a nil injector is a
// valid "no faults" value.
func TestCountsAndNil(t *testing.T) {
	in := faults.New(1, 1)
	in.Fire(faults.SQSPartialFailure, 1)
	in.Fire(faults.SQSPartialFailure, 1)
	in.Count(faults.IngestCrash)
	got := in.Counts()
	if got[faults.SQSPartialFailure] != 2 || got[faults.IngestCrash] != 1 {
		t.Errorf("counts %v", got)
	}
	var none *faults.Injector
	if none.Fire(faults.DynamoThrottle, 1) || none.Counts() != nil {
		t.Error("a nil injector injected something")
	}
}

// TestOnly: an injector limited to some kinds fires those alone, at the
// same rate, and plans no crashes.
func TestOnly(t *testing.T) {
	in := faults.New(3, 1).Only(faults.DynamoConflict)
	for range 50 {
		in.Fire(faults.DynamoThrottle, 1)
		in.Fire(faults.DynamoConflict, 1)
	}
	if got := in.Counts(); got[faults.DynamoThrottle] != 0 || got[faults.DynamoConflict] != 50 {
		t.Errorf("counts %v, want only the 50 conflicts", got)
	}
	ctx := t.Context()
	for range 50 {
		if in.CheckCrash(ctx) != ctx {
			t.Fatal("an injector limited to conflicts planned a crash")
		}
	}
}
