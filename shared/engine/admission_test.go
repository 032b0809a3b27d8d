package engine

import (
	"math"
	"testing"
	"time"
)

func TestAdmission(t *testing.T) {
	a := &Admission{Start: 10, Min: 2, Late: 40 * time.Millisecond, Period: time.Second}
	// period observes requests all late by late over one Period: the
	// allowance is adjusted once, at its end.
	at := time.Unix(1000, 0)
	// period observes n requests spread over one Period, all late by
	// late: the allowance is adjusted once, at its end, when n requests
	// started in a second.
	periodOf := func(late time.Duration, n int) {
		a.observe(at, late)
		for i := 1; i < n; i++ {
			a.observe(at.Add(time.Duration(i)*time.Second/time.Duration(n-1)), late)
		}
		at = at.Add(time.Second)
	}
	period := func(late time.Duration) { periodOf(late, 10) }
	// Ten hosts at one request a second fill the allowance; the next waits.
	for i := range 10 {
		if !a.take(HostRate(time.Second)) {
			t.Fatalf("host %d of 10 refused at a rate of 10", i+1)
		}
	}
	if a.take(HostRate(time.Second)) {
		t.Fatal("an eleventh host admitted beyond the allowance of 10")
	}
	// Requests on time with the allowance reached: before any cut, it
	// doubles (TestAdmissionSlowStart).
	period(time.Millisecond)
	if got := a.Allowed(); got != 20 {
		t.Fatalf("allowed %v after a period on time at the bound, want 20", got)
	}
	// Late requests: the allowance drops below what is in use, so no host
	// is admitted until some end.
	period(200 * time.Millisecond)
	if got := a.Allowed(); got != 9 {
		t.Fatalf("allowed %v after a late period with 10 in use, want 9", got)
	}
	if a.take(HostRate(time.Second)) {
		t.Fatal("a host admitted while the process is behind")
	}
	for range 2 {
		a.give(HostRate(time.Second))
	}
	if !a.take(HostRate(time.Second)) {
		t.Fatal("no host admitted after two ended below the allowance")
	}
	// On time but far from the bound: no growth.
	for range 6 {
		a.give(HostRate(time.Second))
	}
	// The bound was reached in this period (10 in use at its start): it
	// grows; in the next, 3 of 13.5 in use: it stays.
	period(0)
	if got := a.Allowed(); got != 13.5 {
		t.Fatalf("allowed %v after a period on time that reached the bound, want 13.5", got)
	}
	period(0)
	if got := a.Allowed(); got != 13.5 {
		t.Fatalf("allowed %v after a period on time far below the bound, want 13.5 (unchanged)", got)
	}
	// Late, and far fewer requests started than the hosts in use ask for:
	// the allowance drops to the best rate achieved lately, 10 a second a
	// period ago (a fifth less each period since), not to the 5 of this
	// period alone; it follows the decay while the process stays behind.
	for range 10 {
		a.take(HostRate(time.Second))
	}
	used := 10 + 3.0 // three still in use from above
	periodOf(100*time.Millisecond, 5)
	if got := a.Allowed(); got != 8 {
		t.Fatalf("allowed %v after a late period that started 5 requests with %v in use, want 8 (the 10 of the period before, less a fifth)", got, used)
	}
	periodOf(100*time.Millisecond, 5)
	if got := a.Allowed(); math.Abs(got-6.4) > 1e-9 {
		t.Fatalf("allowed %v after a second such period, want 6.4", got)
	}
	for range 10 {
		a.give(HostRate(time.Second))
	}
	// Late with nothing in use: the floor, and a host is still admitted.
	for range 3 {
		a.give(HostRate(time.Second))
	}
	period(time.Second)
	if got := a.Allowed(); got != 2 {
		t.Fatalf("allowed %v after a late period with nothing in use, want the floor 2", got)
	}
	if !a.take(HostRate(0)) {
		t.Fatal("a process with nothing admitted refused a host")
	}
}

// TestAdmissionSlowStart: on time at the bound, the allowance doubles each
// period until it is first cut, and grows by half from then; observe
// reports the periods that end with it grown, and only those.
func TestAdmissionSlowStart(t *testing.T) {
	a := &Admission{Start: 100, Min: 10, Late: 40 * time.Millisecond, Period: time.Second}
	at := time.Unix(1000, 0)
	// fill takes hosts of one request a second up to the allowance.
	fill := func() {
		for a.take(HostRate(time.Second)) {
		}
	}
	// period observes 100 requests over one Period, late by late; it
	// returns what the last observe (the adjustment) reported.
	period := func(late time.Duration) bool {
		var grew bool
		for i := range 100 {
			g := a.observe(at.Add(time.Duration(i)*time.Second/99), late)
			if i < 99 && g {
				t.Fatalf("observe reported growth before the period's end (request %d)", i+1)
			}
			grew = g
		}
		at = at.Add(time.Second + time.Millisecond)
		return grew
	}
	for _, want := range []float64{200, 400, 800} {
		fill()
		if !period(0) {
			t.Fatalf("no growth reported for a period on time at the bound (allowed %v)", a.Allowed())
		}
		if got := a.Allowed(); got != want {
			t.Fatalf("allowed %v after a period on time at the bound, want %v (doubled)", got, want)
		}
	}
	fill()
	if period(200 * time.Millisecond) {
		t.Fatal("growth reported for a late period")
	}
	cut := a.Allowed()
	if cut >= 800 {
		t.Fatalf("allowed %v after a late period, want a cut below 800", cut)
	}
	for a.Allowed() < a.used {
		a.give(HostRate(time.Second))
	}
	fill()
	if !period(0) {
		t.Fatal("no growth reported for a period on time at the bound after the cut")
	}
	if got, want := a.Allowed(), max(cut, a.used)*1.5; got != want {
		t.Fatalf("allowed %v after the cut and a period on time, want %v (grown by half)", got, want)
	}
}

func TestHostRate(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want float64
	}{{time.Second, 1}, {250 * time.Millisecond, 4}, {0, 10}, {10 * time.Second, 0.1}} {
		if got := HostRate(tc.d); got != tc.want {
			t.Errorf("HostRate(%v) = %v, want %v", tc.d, got, tc.want)
		}
	}
}

// A wave of hosts ends while their requests' lateness is still above Late
// but falling fast (the backlog of a busy period draining): the allowance
// holds, so the hosts waiting are admitted at once instead of after the
// lateness has gone; a lateness that stops falling cuts it again.
func TestAdmissionHoldsWhileTheBacklogDrains(t *testing.T) {
	a := &Admission{Start: 10, Min: 2, Late: 40 * time.Millisecond, Period: time.Second}
	a.cut = true // past its slow start (TestAdmissionSlowStart): it grows by half
	at := time.Unix(1000, 0)
	periodOf := func(late time.Duration, n int) {
		for i := range n {
			a.observe(at.Add(time.Duration(i)*time.Second/time.Duration(n-1)), late)
		}
		at = at.Add(time.Second)
	}
	host := HostRate(time.Second)
	take := func(n int) int {
		got := 0
		for range n {
			if a.take(host) {
				got++
			}
		}
		return got
	}
	take(10)
	periodOf(time.Millisecond, 10)
	if got := a.Allowed(); got != 15 {
		t.Fatalf("allowed %v after a period on time at the bound, want 15", got)
	}
	take(5)
	// Behind, and more so than before: cut to a tenth below the 15 in use.
	periodOf(200*time.Millisecond, 15)
	if got := a.Allowed(); got != 13.5 {
		t.Fatalf("allowed %v after a late period with 15 in use, want 13.5", got)
	}
	// Ten hosts end together; the next period is still late, but by 120
	// ms against 200: draining. The allowance stays, and eight hosts
	// waiting get in.
	for range 10 {
		a.give(host)
	}
	periodOf(120*time.Millisecond, 12)
	if got := a.Allowed(); got != 13.5 {
		t.Fatalf("allowed %v while the backlog drains (late 120 ms after 200), want 13.5 (held)", got)
	}
	if got := take(8); got != 8 {
		t.Fatalf("admitted %d of 8 hosts with 5 in use and 13.5 allowed", got)
	}
	// Lateness no longer falling: behind again, cut below the 13 in use.
	periodOf(130*time.Millisecond, 12)
	if got := a.Allowed(); math.Abs(got-11.7) > 1e-9 {
		t.Fatalf("allowed %v after a late period that did not drain (130 ms after 120), want 11.7", got)
	}
	// Keeping up again (late by less than Late) with the 13 in use: each
	// may be replaced as it ends.
	periodOf(20*time.Millisecond, 13)
	if got := a.Allowed(); got != 13 {
		t.Fatalf("allowed %v after a period late by 20 ms (Late 40) with 13 in use, want 13", got)
	}
	// On time at the bound: half as much again as in use.
	periodOf(time.Millisecond, 13)
	if got := a.Allowed(); got != 19.5 {
		t.Fatalf("allowed %v after a period on time with 13 in use and allowed, want 19.5", got)
	}
}
