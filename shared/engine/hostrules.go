package engine

import (
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
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

// hostRate is the request rate the admission counts the host key at
// (Admission, HostRate) under p: FetchDelay's, as for every host, or, for a
// host whose rule gives it several connections (lanes.go), that many times
// the rate of the rule's delay: each lane keeps the delay, so N lanes ask
// for N times one connection's requests.
func hostRate(p params.Params, key string) float64 {
	r, ok := p.HostRules.Match(key)
	if !ok || r.Connections <= 1 {
		return HostRate(p.FetchDelay)
	}
	d := p.FetchDelay
	if r.HasDelay {
		d = r.Delay
	}
	return float64(r.Connections) * HostRate(d)
}
