package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
)

// waitingText renders why hosts wait, for the progress line: "waiting: 3
// hosts until 13:45:02 (back-off or Retry-After), 1 host Crawl-delay 30s";
// empty when nothing waits.
func waitingText(ws []localmode.Wait) string {
	var parts []string
	for _, w := range ws {
		hosts := fmt.Sprintf("%d hosts", w.Hosts)
		if w.Hosts == 1 {
			hosts = "1 host"
		}
		switch {
		case w.Reason == localmode.WaitCrawlDelay:
			parts = append(parts, fmt.Sprintf("%s Crawl-delay up to %s", hosts, w.Delay))
		case !w.Until.IsZero():
			parts = append(parts, fmt.Sprintf("%s until %s (%s)", hosts, w.Until.Local().Format(time.TimeOnly), w.Reason))
		default:
			parts = append(parts, fmt.Sprintf("%s (%s)", hosts, w.Reason))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "  waiting: " + strings.Join(parts, ", ")
}
