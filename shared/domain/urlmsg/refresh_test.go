package urlmsg_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/refresh"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

func TestRefreshFields(t *testing.T) {
	lim := urlmsg.Limits{Refresh: refresh.Bounds{Min: time.Minute, Max: 24 * time.Hour}}
	type want struct {
		every        time.Duration
		stop         bool
		adapt, unchg bool
		err          string
	}
	for _, tc := range []struct {
		name string
		item string
		want want
	}{
		{"plain", `{"url": "http://a.example/"}`, want{}},
		{"interval", `{"url": "http://a.example/", "refresh": "15m"}`, want{every: 15 * time.Minute}},
		{"adaptive, emitting unchanged", `{"url": "http://a.example/", "refresh": "1h", "refreshAdapt": true, "emitUnchanged": true}`,
			want{every: time.Hour, adapt: true, unchg: true}},
		{"flags false", `{"url": "http://a.example/", "refresh": "1h", "refreshAdapt": false, "emitUnchanged": null}`, want{every: time.Hour}},
		{"names out of order take the walk", `{"refreshAdapt": true, "refresh": "2h", "URL": "x"}`, want{err: `unknown field "URL"`}},
		{"stop", `{"url": "http://a.example/", "refresh": "0"}`, want{stop: true}},
		{"below MinRefresh", `{"url": "http://a.example/", "refresh": "30s"}`, want{err: "below MinRefresh (1m0s)"}},
		{"above MaxRefresh", `{"url": "http://a.example/", "refresh": "48h"}`, want{err: "above MaxRefresh (24h0m0s)"}},
		{"not a duration", `{"url": "http://a.example/", "refresh": "hourly"}`, want{err: "is not a duration"}},
		{"a number", `{"url": "http://a.example/", "refresh": 900}`, want{err: `field "refresh" must be a JSON string, not a number`}},
		{"a string flag", `{"url": "http://a.example/", "refresh": "1h", "refreshAdapt": "yes"}`, want{err: `field "refreshAdapt" must be true or false, not a string`}},
		{"flag without interval", `{"url": "http://a.example/", "emitUnchanged": true}`, want{err: "need a refresh interval"}},
		{"stop with a flag", `{"url": "http://a.example/", "refresh": "0", "refreshAdapt": true}`, want{err: "stops a schedule"}},
		{"misspelt", `{"url": "http://a.example/", "refrsh": "1h"}`, want{err: `did you mean "refresh"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, bad, err := urlmsg.ParseLimited("src", []byte(tc.item), lim)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.err != "" {
				if len(bad) != 1 || !strings.Contains(bad[0].Error, tc.want.err) {
					t.Fatalf("refusals %+v, want one containing %q", bad, tc.want.err)
				}
				return
			}
			if len(bad) != 0 || len(msgs) != 1 {
				t.Fatalf("messages %+v, refusals %+v; want one message", msgs, bad)
			}
			m := msgs[0]
			got := want{every: m.Refresh, stop: m.RefreshStop, adapt: m.RefreshAdapt, unchg: m.EmitUnchanged}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseAppliesTheDefaultBounds(t *testing.T) {
	_, bad, err := urlmsg.Parse("src", []byte(`{"url": "http://a.example/", "refresh": "5s"}`))
	if err != nil || len(bad) != 1 || !strings.Contains(bad[0].Error, "MinRefresh") {
		t.Fatalf("refusals %+v (err %v), want one naming MinRefresh", bad, err)
	}
	_, err = urlmsg.Validate(urlmsg.Input{URL: "http://a.example/", Refresh: "1000h"})
	if !errors.Is(err, urlmsg.ErrInvalid) || !strings.Contains(err.Error(), "MaxRefresh") {
		t.Fatalf("Validate: %v, want an invalid input naming MaxRefresh", err)
	}
}
