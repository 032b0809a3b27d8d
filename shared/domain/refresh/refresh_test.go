package refresh_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/refresh"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

var (
	t0     = time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	bounds = refresh.Bounds{Min: time.Minute, Max: 24 * time.Hour}
)

func TestBoundsCheckNamesTheParameter(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{30 * time.Second, "MinRefresh"},
		{25 * time.Hour, "MaxRefresh"},
		{time.Minute, ""},
		{24 * time.Hour, ""},
	} {
		err := bounds.Check(tc.d)
		if tc.want == "" {
			if err != nil {
				t.Errorf("Check(%s) = %v, want nil", tc.d, err)
			}
			continue
		}
		if !errors.Is(err, refresh.ErrOutOfBounds) || !strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("Check(%s) = %v, want an ErrOutOfBounds naming %s", tc.d, err, tc.want)
		}
	}
}

func TestParseInterval(t *testing.T) {
	for _, tc := range []struct {
		in   string
		d    time.Duration
		stop bool
		bad  bool
	}{
		{in: "15m", d: 15 * time.Minute},
		{in: "1h30m", d: 90 * time.Minute},
		{in: "0", stop: true},
		{in: " 0 ", stop: true},
		{in: "0s", bad: true},
		{in: "-5m", bad: true},
		{in: "15", bad: true},
		{in: "daily", bad: true},
		{in: "", bad: true},
	} {
		d, stop, err := refresh.ParseInterval(tc.in)
		if (err != nil) != tc.bad || d != tc.d || stop != tc.stop {
			t.Errorf("ParseInterval(%q) = %s, %v, %v; want %s, %v, bad %v", tc.in, d, stop, err, tc.d, tc.stop, tc.bad)
		}
	}
}

func TestFirstDueSpreadsWithinTheInterval(t *testing.T) {
	every := time.Hour
	slots := map[time.Duration]int{}
	for i := range 1000 {
		key := fmt.Sprintf("example.com /feed/%d", i)
		due := refresh.FirstDue(t0, every, key)
		if due.Before(t0) || !due.Before(t0.Add(every)) {
			t.Fatalf("FirstDue(%s) = %s, outside [now, now+every)", key, due)
		}
		if again := refresh.FirstDue(t0, every, key); !again.Equal(due) {
			t.Fatalf("FirstDue(%s) is %s then %s: a resent URL must keep its offset", key, due, again)
		}
		slots[due.Sub(t0)/(6*time.Minute)]++
	}
	// Ten 6-minute slots of the hour: each gets about 100; none is empty
	// or holds a third of the URLs.
	for s := range time.Duration(10) {
		if n := slots[s]; n < 50 || n > 333 {
			t.Errorf("slot %d of the hour holds %d of 1000 first fetches: %v", s, n, slots)
		}
	}
}

func TestNextCoalescesMissedCycles(t *testing.T) {
	due := t0
	for _, tc := range []struct {
		name  string
		at    time.Time
		adapt bool
		want  time.Time
	}{
		{"on time", t0, false, t0.Add(time.Hour)},
		{"a little late keeps the phase", t0.Add(5 * time.Minute), false, t0.Add(time.Hour)},
		{"a day late: one fetch, next after it", t0.Add(25*time.Hour + time.Minute), false, t0.Add(26 * time.Hour)},
		{"exactly a cycle late", t0.Add(time.Hour), false, t0.Add(2 * time.Hour)},
		{"adaptive counts from the fetch", t0.Add(25 * time.Hour), true, t0.Add(26 * time.Hour)},
		{"adaptive a little late", t0.Add(5 * time.Minute), true, t0.Add(65 * time.Minute)},
	} {
		got := refresh.Next(due, tc.at, time.Hour, tc.adapt)
		if !got.Equal(tc.want) {
			t.Errorf("%s: Next = %s, want %s", tc.name, got.Sub(t0), tc.want.Sub(t0))
		}
		if !got.After(tc.at) {
			t.Errorf("%s: Next = %s is not after the fetch", tc.name, got.Sub(t0))
		}
	}
}

func TestAdaptStaysWithinBounds(t *testing.T) {
	every := time.Hour
	for range 50 {
		every = refresh.Adapt(every, refresh.Unchanged, bounds)
	}
	if every != bounds.Max {
		t.Errorf("after 50 unchanged fetches the interval is %s, want MaxRefresh %s", every, bounds.Max)
	}
	for range 50 {
		every = refresh.Adapt(every, refresh.Changed, bounds)
	}
	if every != bounds.Min {
		t.Errorf("after 50 changes the interval is %s, want MinRefresh %s", every, bounds.Min)
	}
	if got := refresh.Adapt(time.Hour, refresh.Unchanged, bounds); got != 84*time.Minute {
		t.Errorf("unchanged: %s, want 1h x 1.4 = 84m", got)
	}
	if got := refresh.Adapt(time.Hour, refresh.Changed, bounds); got != 48*time.Minute {
		t.Errorf("changed: %s, want 1h x 0.8 = 48m", got)
	}
	if got := refresh.Adapt(time.Hour, refresh.Failed, bounds); got != time.Hour {
		t.Errorf("failed: %s, want the interval unchanged", got)
	}
}

func fetched(sha, etag string) result.Result {
	return result.Result{Status: result.StatusFetched, HTTPStatus: 200, SHA256: sha, ETag: etag}
}

func TestAfterEmitsPerTheRules(t *testing.T) {
	base := refresh.Schedule{Every: time.Hour, Due: t0, ETag: `"a"`, SHA256: "aaa", Seq: 3}
	notModified := result.Result{Status: result.StatusNotModified, HTTPStatus: 304, ETag: `"a"`}
	failed := result.Result{Status: result.StatusFetchError, HTTPStatus: 503, Error: "503"}
	for _, tc := range []struct {
		name        string
		s           refresh.Schedule
		r           result.Result
		emit, chg   bool
		seq         int
		sha, etag   string
		wantNextSeq int
	}{
		{"first fetch emits changed", refresh.Schedule{Every: time.Hour, Due: t0}, fetched("aaa", `"a"`), true, true, 1, "aaa", `"a"`, 1},
		{"first fetch answered 304 to the input's validators", refresh.Schedule{Every: time.Hour, Due: t0, ETag: `"a"`}, notModified, true, false, 1, "", `"a"`, 1},
		{"first fetch failing emits", refresh.Schedule{Every: time.Hour, Due: t0}, failed, true, false, 1, "", "", 1},
		{"304 emits nothing", base, notModified, false, false, 0, "aaa", `"a"`, 3},
		{"same digest emits nothing", base, fetched("aaa", `"b"`), false, false, 0, "aaa", `"b"`, 3},
		{"new digest emits changed", base, fetched("bbb", `"b"`), true, true, 4, "bbb", `"b"`, 4},
		{"failure emits, keeps validators", base, failed, true, false, 4, "aaa", `"a"`, 4},
		{"emitUnchanged emits a 304", withEmit(base), notModified, true, false, 4, "aaa", `"a"`, 4},
		{"a 304 after a failure emits", failing(base), notModified, true, false, 4, "aaa", `"a"`, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.s.After(tc.r, t0.Add(time.Minute), bounds)
			if d.Emit != tc.emit || d.Changed != tc.chg || d.Seq != tc.seq {
				t.Errorf("emit %v changed %v seq %d, want %v %v %d", d.Emit, d.Changed, d.Seq, tc.emit, tc.chg, tc.seq)
			}
			if d.Next.SHA256 != tc.sha || d.Next.ETag != tc.etag || d.Next.Seq != tc.wantNextSeq {
				t.Errorf("next state sha %q etag %q seq %d, want %q %q %d", d.Next.SHA256, d.Next.ETag, d.Next.Seq, tc.sha, tc.etag, tc.wantNextSeq)
			}
			if !d.Next.Due.Equal(t0.Add(time.Hour)) || d.Lag != time.Minute {
				t.Errorf("next due %s lag %s, want 1h and 1m", d.Next.Due.Sub(t0), d.Lag)
			}
		})
	}
}

func failing(s refresh.Schedule) refresh.Schedule {
	s.Failing = true
	return s
}

func withEmit(s refresh.Schedule) refresh.Schedule {
	s.EmitUnchanged = true
	return s
}

func TestRedirectTargetIsTheContent(t *testing.T) {
	s := refresh.Schedule{Every: time.Hour, Due: t0}
	to := func(loc string) result.Result { return result.Result{Status: result.StatusRedirect, Location: loc} }
	d := s.After(to("https://b.example/1"), t0, bounds)
	d = d.Next.After(to("https://b.example/1"), d.Next.Due, bounds)
	if d.Emit {
		t.Error("a redirect to the same target again was emitted")
	}
	if d = d.Next.After(to("https://b.example/2"), d.Next.Due, bounds); !d.Emit || !d.Changed {
		t.Errorf("a redirect to a new target: emit %v changed %v, want a change", d.Emit, d.Changed)
	}
}

// page is a fake server's content over virtual time: its digest changes
// at the times listed.
type page struct{ changes []time.Time }

func (p page) at(now time.Time) result.Result {
	v := 0
	for _, c := range p.changes {
		if !c.After(now) {
			v++
		}
	}
	return fetched(fmt.Sprintf("v%d", v), fmt.Sprintf(`"%d"`, v))
}

// run drives a schedule over virtual time: the fetch happens late by the
// given function of the due time (politeness, a stopped job).
func run(s refresh.Schedule, p page, until time.Time, late func(time.Time) time.Duration) (fetches []time.Time, emitted []refresh.Decision) {
	for s.Due.Before(until) {
		at := s.Due.Add(late(s.Due))
		d := s.After(p.at(at), at, bounds)
		fetches = append(fetches, at)
		if d.Emit {
			emitted = append(emitted, d)
		}
		s = d.Next
	}
	return fetches, emitted
}

func TestFixedScheduleInVirtualTime(t *testing.T) {
	p := page{changes: []time.Time{t0.Add(150 * time.Minute), t0.Add(10 * time.Hour)}}
	s := refresh.Schedule{Every: time.Hour, Due: t0}
	fetches, emitted := run(s, p, t0.Add(12*time.Hour), func(time.Time) time.Duration { return 2 * time.Second })
	if len(fetches) != 12 {
		t.Fatalf("%d fetches in 12 hours at 1h, want 12", len(fetches))
	}
	for i, f := range fetches {
		if want := t0.Add(time.Duration(i)*time.Hour + 2*time.Second); !f.Equal(want) {
			t.Errorf("fetch %d at %s, want %s (the phase drifted)", i, f.Sub(t0), want.Sub(t0))
		}
	}
	// The first fetch, then the fetch after each change: at 3h and 10h.
	if len(emitted) != 3 {
		t.Fatalf("%d results, want 3 (first, two changes)", len(emitted))
	}
	for i, d := range emitted {
		if d.Seq != i+1 || !d.Changed {
			t.Errorf("result %d: seq %d changed %v, want seq %d changed", i, d.Seq, d.Changed, i+1)
		}
	}
}

func TestStoppedJobCoalescesIntoOneFetch(t *testing.T) {
	s := refresh.Schedule{Every: time.Hour, Due: t0}
	stoppedUntil := t0.Add(30*time.Hour + 20*time.Minute)
	fetches, _ := run(s, page{}, t0.Add(34*time.Hour), func(due time.Time) time.Duration {
		if due.Before(stoppedUntil) && due.After(t0) {
			return stoppedUntil.Sub(due)
		}
		return 0
	})
	want := []time.Duration{0, 30*time.Hour + 20*time.Minute, 31 * time.Hour, 32 * time.Hour, 33 * time.Hour}
	if len(fetches) != len(want) {
		t.Fatalf("fetches at %v, want %v", since(fetches), want)
	}
	for i := range want {
		if fetches[i].Sub(t0) != want[i] {
			t.Fatalf("fetches at %v, want %v", since(fetches), want)
		}
	}
}

func TestAdaptiveScheduleInVirtualTime(t *testing.T) {
	// Quiet for a week: the interval grows to MaxRefresh; a page that
	// changes more often than MinRefresh pulls it down to MinRefresh.
	s := refresh.Schedule{Every: time.Hour, Due: t0, Adapt: true}
	fetches, emitted := run(s, page{}, t0.Add(7*24*time.Hour), func(time.Time) time.Duration { return 0 })
	if len(emitted) != 1 {
		t.Errorf("a page that never changed sent %d results, want 1 (the first)", len(emitted))
	}
	gaps := since(fetches)
	last := fetches[len(fetches)-1].Sub(fetches[len(fetches)-2])
	if last != bounds.Max {
		t.Errorf("the interval of a quiet page ends at %s, want MaxRefresh %s (fetches %v)", last, bounds.Max, gaps)
	}
	var changes []time.Time
	for m := time.Duration(0); m < 48*time.Hour; m += 30 * time.Second {
		changes = append(changes, t0.Add(m))
	}
	s = refresh.Schedule{Every: time.Hour, Due: t0, Adapt: true}
	fetches, emitted = run(s, page{changes: changes}, t0.Add(24*time.Hour), func(time.Time) time.Duration { return 0 })
	if last := fetches[len(fetches)-1].Sub(fetches[len(fetches)-2]); last != bounds.Min {
		t.Errorf("the interval of a busy page ends at %s, want MinRefresh %s", last, bounds.Min)
	}
	if len(emitted) != len(fetches) {
		t.Errorf("%d of %d fetches of a page changing every 30s emitted", len(emitted), len(fetches))
	}
}

func since(ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, x := range ts {
		out[i] = x.Sub(t0)
	}
	return out
}

func TestParameterNamesMatchPackageParams(t *testing.T) {
	for got, want := range map[string]string{
		refresh.NameMinRefresh:        params.NameMinRefresh,
		refresh.NameMaxRefresh:        params.NameMaxRefresh,
		refresh.NameMaxRefreshPerHost: params.NameMaxRefreshPerHost,
	} {
		if got != want {
			t.Errorf("refresh names %q where package params has %q", got, want)
		}
	}
}
