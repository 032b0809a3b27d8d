package localmode

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/web/warc"
)

// openWarc creates the WARC writer of Options.Warc: every exchange the
// fetcher makes (robots.txt and redirect hops included) is a request and
// a response record there, and results name their record. A resumed job
// writes the next file of the sequence (warc.Create), so no record goes
// after a partial one a crash left.
func openWarc(opts Options, p params.Params, now func() time.Time) (*warc.Writer, error) {
	w, err := warc.Create(warc.Options{Path: opts.Warc, MaxFileBytes: opts.WarcMaxBytes, Info: warcInfo(p), Now: now})
	if err != nil {
		return nil, fmt.Errorf("warc output: %w", err)
	}
	return w, nil
}

// warcInfo is what opens every WARC file: the software and the
// parameters that shape what was fetched and how politely.
func warcInfo(p params.Params) [][2]string {
	return [][2]string{
		{"software", "urldownloader/" + version()},
		{"isPartOf", "urldownloader local mode"},
		{"http-header-user-agent", p.UserAgent},
		{"robots", map[bool]string{true: "obey", false: "ignore"}[p.RespectRobots]},
		{"fetchDelay", p.FetchDelay.String()},
		{"randomizeDelay", strconv.FormatBool(p.RandomizeDelay)},
		{"maxCrawlDelay", p.MaxCrawlDelay.String()},
		{"fetchTimeout", p.FetchTimeout.String()},
		{"maxBodyBytes", strconv.FormatInt(p.MaxBodyBytes, 10)},
		{"maxAttempts", strconv.Itoa(p.MaxAttempts)},
		{"followCrossHostRedirects", strconv.FormatBool(p.FollowCrossHostRedirects)},
		{"queueMode", string(p.QueueMode)},
	}
}

// version is the build's module version, else its VCS revision.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel+" + s.Value[:12]
		}
	}
	return "devel"
}

// WarcFiles lists the WARC files this process wrote (none without
// Options.Warc).
func (rt *Runtime) WarcFiles() []string {
	if rt.warc == nil {
		return nil
	}
	return rt.warc.Files()
}
