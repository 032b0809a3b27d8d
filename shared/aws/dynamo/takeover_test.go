package dynamo_test

import (
	"testing"
	"time"
)

// TestLeaseTakeoverHook: OnTakeover is called when a lease another owner
// let expire is taken, never for a free, released or own (renewed) one.
func TestLeaseTakeoverHook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	st := e.fresh()
	n := 0
	st.OnTakeover = func() { n++ }
	const vs = 11
	steps := []struct {
		owner string
		now   time.Duration // after t0; each lease lasts a minute
		want  int
	}{
		{"a", 0, 0},                // free
		{"a", 30 * time.Second, 0}, // renewed
		{"b", 2 * time.Minute, 1},  // a's lease expired: taken over
	}
	for _, s := range steps {
		ok, err := st.AcquireShard(ctx, vs, s.owner, t0.Add(s.now+time.Minute), t0.Add(s.now))
		if err != nil || !ok {
			t.Fatalf("AcquireShard(%s at +%s) = %v, %v", s.owner, s.now, ok, err)
		}
		if n != s.want {
			t.Fatalf("after %s at +%s: %d takeovers, want %d", s.owner, s.now, n, s.want)
		}
	}
	if err := st.ReleaseShard(ctx, vs, "b"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.AcquireShard(ctx, vs, "c", t0.Add(4*time.Minute), t0.Add(3*time.Minute)); err != nil || !ok || n != 1 {
		t.Fatalf("a released lease taken: %v, %v, %d takeovers, want 1", ok, err, n)
	}
}
