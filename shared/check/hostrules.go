package check

import (
	"time"

	"github.com/urldownloader/urldownloader/shared/params"
)

// hostRule is the HostRules rule in force for the worker's host, if any.
// Matching is a walk over a short list already parsed (params.HostRules),
// cheap enough per request; it follows a change of the parameter at the
// next round (refreshParams).
func (w *worker) hostRule() (params.HostRule, bool) {
	return w.p.HostRules.Match(w.key)
}

// fetchDelay is the host's base delay: its rule's, else FetchDelay.
// robots.txt Crawl-delay still raises it (see delay). A rule's MaxDelay
// (params.HostRule) is the cap for the delay raised for slow or
// rate-limiting hosts, read the same way where that delay is computed.
func (w *worker) fetchDelay() time.Duration {
	if r, ok := w.hostRule(); ok && r.HasDelay {
		return r.Delay
	}
	return w.p.FetchDelay
}
