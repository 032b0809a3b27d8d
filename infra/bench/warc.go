package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/internal/billing"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// The WARC benchmark (`-only warc`, issue 23): what keeping every exchange
// as WARC records costs. Locally: local mode at H hosts with and without
// --warc on the same site and URLs (throughput, CPU, memory, WARC bytes
// per URL). On moto: the bodies benchmark's runs (bodies.go) at 100 KB,
// 1 MB and the default MaxBodyBytes, each with one object per stored body
// and with WarcOutput, counting the S3 requests and pricing them at list
// prices as the bodies section does.

// WarcConfig sizes the part.
type WarcConfig struct {
	// Hosts is the local rows' H; its U and d are the politeness row's
	// (Config.rowShape).
	Hosts int
	// Bodies are the sizes run on moto, each twice.
	Bodies []BodySize
}

// FullWarc is what `make bench -only warc` runs.
func FullWarc() WarcConfig {
	return WarcConfig{Hosts: 1000, Bodies: []BodySize{
		{"100 KB", 100_000, 200, 40},
		{"1 MB", 1_000_000, 60, 20},
		{"10 MiB (default MaxBodyBytes)", params.DefaultMaxBodyBytes, 10, 5},
	}}
}

// WarcLocal is local mode at one H, without and with --warc.
type WarcLocal struct {
	Hosts, PerHost, URLs int
	Delay                time.Duration
	Off, On              RunStats
	// WarcBytes are the bytes of the files --warc wrote, Files their
	// number.
	WarcBytes int64
	Files     int
}

// WarcResult is the part's run.
type WarcResult struct {
	Local *WarcLocal
	// Bodies are the moto runs, by size: one object per body, then
	// WarcOutput.
	Bodies []*BodiesResult
}

// warc runs the part.
func (e *benchEnv) warc(ctx context.Context, cfg WarcConfig) (*WarcResult, error) {
	res := &WarcResult{}
	if cfg.Hosts > 0 {
		l, err := e.warcLocal(ctx, cfg.Hosts)
		if err != nil {
			return res, fmt.Errorf("local H=%d: %w", cfg.Hosts, err)
		}
		res.Local = l
	}
	for _, sz := range cfg.Bodies {
		for _, on := range []bool{false, true} {
			r, err := e.bodiesRun(ctx, sz, on)
			if err != nil {
				return res, fmt.Errorf("bodies %s (WarcOutput %v): %w", sz.Name, on, err)
			}
			e.log.Info("warc: bodies", "size", sz.Name, "warcOutput", on, "wall", r.Wall, "warcBytes", r.WarcBytes, "segments", r.Segments)
			res.Bodies = append(res.Bodies, r)
		}
	}
	return res, nil
}

// warcLocal runs local mode over one site twice, the politeness row's URLs
// in one shuffled order, without --warc and then with it.
func (e *benchEnv) warcLocal(ctx context.Context, hosts int) (*WarcLocal, error) {
	shape := e.cfg.rowShape(hosts)
	per, err := hostsPerListener(hosts)
	if err != nil {
		return nil, err
	}
	site, err := e.siteWith(demosite.Options{Hosts: hosts, Robots: robotsRules, HostsPerListener: per})
	if err != nil {
		return nil, err
	}
	defer site.Close()
	urls := site.URLs(shape.PerHost)
	rng := rand.New(rand.NewPCG(uint64(hosts), 23))
	rng.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
	r, err := e.runner(ctx)
	if err != nil {
		return nil, err
	}
	res := &WarcLocal{Hosts: hosts, PerHost: shape.PerHost, URLs: len(urls), Delay: shape.Delay}
	name := fmt.Sprintf("warc%d", hosts)
	e.log.Info("warc: local mode without --warc", "hosts", hosts, "urls", len(urls))
	if res.Off, err = e.localRunEnv(ctx, site, urls, hosts, shape.Delay, name+"off", nil); err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond)
	path := filepath.Join(r.dir, name+".warc.gz")
	e.log.Info("warc: local mode with --warc", "hosts", hosts, "urls", len(urls), "file", path)
	if res.On, err = e.localRunEnv(ctx, site, urls, hosts, shape.Delay, name+"on", nil, "--warc", path); err != nil {
		return nil, err
	}
	// out.warc.gz names the sequence out-00000.warc.gz, out-00001...
	files, err := filepath.Glob(strings.TrimSuffix(path, ".warc.gz") + "-*.warc.gz")
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("--warc %s wrote no file (%v)", path, err)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		res.WarcBytes += st.Size()
		res.Files++
	}
	return res, nil
}

// warcTable is the section `-only warc` writes.
func warcTable(r *WarcResult) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	if l := r.Local; l != nil {
		w("**Local mode** at H=%d: the politeness row's demo site and URLs (%d hosts × %d URLs at a %s delay, small pages, a robots.txt each), run by the local-mode binary twice on one site, each with a new state: without `--warc`, then with it. *requests/s* is the steady rate while every host is busy (the bound is H/d = %.0f/s); *CPU* the child's user and system time; *WARC bytes per URL* the files' bytes (a warcinfo record, and a request and a response record per request made, robots.txt included, each its own gzip member) over the URLs given.\n\n",
			l.Hosts, l.Hosts, l.PerHost, l.Delay, float64(l.Hosts)/l.Delay.Seconds())
		w("| local mode, H=%d | wall | requests/s (steady) | CPU | peak RSS | results | WARC written | **WARC bytes per URL** |\n|---|---|---|---|---|---|---|---|\n", l.Hosts)
		for _, row := range []struct {
			name string
			st   RunStats
			on   bool
		}{{"without `--warc`", l.Off, false}, {"with `--warc`", l.On, true}} {
			cpu, rss := "-", "-"
			if p := row.st.Process; p != nil {
				cpu, rss = secs(p.CPU), fmt.Sprintf("%.0f MiB", float64(p.MaxRSS)/(1<<20))
			}
			written, perURL := "-", "-"
			if row.on {
				written = fmt.Sprintf("%.2f MB in %d file(s)", float64(l.WarcBytes)/1e6, l.Files)
				perURL = fmt.Sprintf("**%.0f**", float64(l.WarcBytes)/float64(l.URLs))
			}
			w("| %s | %s | %.0f | %s | %s | %s | %s | %s |\n", row.name, secs(row.st.Wall), row.st.SteadyRate, cpu, rss, statusCounts(row.st.Results), written, perURL)
		}
		w("\n")
	}
	if len(r.Bodies) > 0 {
		w("**On moto, the bodies benchmark with `WarcOutput`**: each size runs twice, as in Whole bodies (the real ingest and check handlers, the template's bucket and output queue, `FetchDelay` 0, `MaxBodyBytes` at least the body, each URL a distinct body of pseudo-random bytes): with one object per body above `InlineBodyBytes` (`sha256/`), then with `WarcOutput=true`, where every exchange is a record in segments under `warc/` streamed by multipart upload and a body above the inline limit has no object of its own. S3 requests are counted on moto as the SDK sends them and priced at us-east-1 list prices (PUT-class: PUT, multipart create/part/complete, COPY: $0.005 per 1,000; GET-class: HEAD, GET: $0.0004 per 1,000); storage is the objects and segments kept %d days ($0.023 per GB-month); a consumer reads a stored body with one GET (with `WarcOutput`, one ranged GET of its record). *WARC bytes per URL* are the segments' bytes over the URLs (robots.txt and request records included). The last column is the bodies' own cost per million URLs (the per-URL DynamoDB and SQS costs of the cost section come on top).\n\n", bodyRetentionDays)
		w("| body | storage | URLs / hosts | inline / stored | wall | bytes/s | peak live heap | WARC bytes per URL | S3 requests per URL (put / get) | **S3 requests per million URLs** | $/M: S3 requests | $/M: S3 storage %dd | $/M: SQS and consumer reads | **$/M total** |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", bodyRetentionDays)
		for _, br := range r.Bodies {
			n := float64(br.URLs)
			put, get := 0, 0
			for _, l := range br.S3 {
				switch l.Class {
				case billing.S3ClassPut:
					put += l.Requests
				case billing.S3ClassGet:
					get += l.Requests
				}
			}
			mode, warcPerURL := "object per body", "-"
			if br.Warc {
				mode = fmt.Sprintf("`WarcOutput` (%d segments)", br.Segments)
				warcPerURL = fmt.Sprintf("%.0f", float64(br.WarcBytes)/n)
			}
			w("| %s | %s | %d / %d | %d / %d | %s | %s | %.1f MiB | %s | %.2f / %.2f | **%.0f** | %.2f | %.2f | %.2f | **%.2f** |\n",
				br.Name, mode, br.URLs, br.Hosts, br.Inline, br.Stored, secs(br.Wall), rate(float64(br.BodyBytes)/br.Wall.Seconds()),
				float64(br.PeakLive)/(1<<20), warcPerURL, float64(put)/n, float64(get)/n, float64(put+get)/n*1e6,
				br.s3Requests(billing.S3ClassPut)+br.s3Requests(billing.S3ClassGet), br.storage(),
				br.sqsSend()+br.consumer()+br.consumerGets(), br.total())
		}
		w("\n")
	}
	return b.String()
}

// statusCounts is a run's results by status, fetched first.
func statusCounts(m map[string]int) string {
	var parts []string
	for _, s := range []string{"fetched", "denied"} {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[s], s))
		}
	}
	other := 0
	for s, n := range m {
		if s != "fetched" && s != "denied" {
			other += n
		}
	}
	if other > 0 {
		parts = append(parts, fmt.Sprintf("%d other", other))
	}
	return strings.Join(parts, ", ")
}

var warcSection = ownSection{part: "warc", name: "warc", heading: "WARC output"}

// writeWarc replaces the WARC section of the markdown file at path
// (appending it when missing).
func writeWarc(path string, r *WarcResult, m Machine) error {
	return warcSection.write(path, m.runLine(true), warcTable(r))
}
