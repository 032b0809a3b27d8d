package main

import (
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
)

func TestWaitingText(t *testing.T) {
	at := time.Date(2026, 1, 2, 13, 45, 2, 0, time.Local)
	got := waitingText([]localmode.Wait{
		{Reason: localmode.WaitPaused, Hosts: 3, Until: at},
		{Reason: localmode.WaitCrawlDelay, Hosts: 1, Delay: 30 * time.Second},
		{Reason: localmode.WaitCheck, Hosts: 2, Until: at},
	})
	want := "  waiting: 3 hosts until 13:45:02 (back-off or Retry-After), 1 host Crawl-delay up to 30s, 2 hosts until 13:45:02 (next check)"
	if got != want {
		t.Errorf("waiting\n got %q\nwant %q", got, want)
	}
	if got := waitingText(nil); got != "" {
		t.Errorf("nothing waits: %q, want nothing", got)
	}
}
