package sqlite_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/hostqueue"
	"github.com/urldownloader/urldownloader/shared/politeness"
	"github.com/urldownloader/urldownloader/shared/sqlite"
)

// BenchmarkLocalRun stores and drains issue 10's local target: 100,000
// URLs over 1,000 hosts. They arrive as ingest gets them (batches of 10,000
// URLs grouped by host, so 10 URLs per host per append) and leave as the
// check engine takes them (a commit of 10 done per host turn, the next head
// returned by the commit, a release when a host is drained, a due query
// per virtual shard per round). It reports the time per URL of each phase,
// the file's size (with its WAL) when full, and the process's peak RSS.
// The CPU time per URL (of the whole process, garbage collection included)
// is the steadier figure on a shared machine.
//
//	go test -run '^$' -bench LocalRun -benchtime 1x ./shared/sqlite/
func BenchmarkLocalRun(b *testing.B) {
	const hosts, perHost, batch, commitSize = 1000, 100, 10_000, 10
	const urls = hosts * perHost
	keys := make([]string, hosts)
	for i := range keys {
		keys[i] = fmt.Sprintf("host-%04d.example", i)
	}
	for _, mode := range []string{"file", "memory"} {
		b.Run(mode, func(b *testing.B) {
			var appendTime, drainTime, appendCPU, drainCPU time.Duration
			var fileBytes int64
			for range b.N {
				b.StopTimer()
				now := time.UnixMilli(1_760_000_000_000)
				clock := func() time.Time { return now }
				var s *sqlite.Store
				var err error
				path := filepath.Join(b.TempDir(), "state.db")
				if mode == "file" {
					s, err = sqlite.New(path, clock)
				} else {
					s, err = sqlite.NewMemory(clock)
				}
				if err != nil {
					b.Fatal(err)
				}
				ctx := b.Context()
				b.StartTimer()

				start, cpu := time.Now(), cpuTime()
				for first := 0; first < urls; first += batch {
					// One ingest batch: URL n goes to host n % hosts.
					byHost := make([][]hostqueue.Entry, hosts)
					for n := first; n < first+batch; n++ {
						h := n % hosts
						byHost[h] = append(byHost[h], hostqueue.Entry{
							ID:  fmt.Sprintf("%08d", n),
							URL: fmt.Sprintf("https://%s/articles/2025/%06d/some-title-of-the-page?ref=feed", keys[h], n),
						})
					}
					for h, es := range byHost {
						if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: keys[h], Entries: es, Limit: 4000, Due: now}); err != nil {
							b.Fatal(err)
						}
					}
				}
				appendTime += time.Since(start)
				appendCPU += cpuTime() - cpu
				b.StopTimer()
				if mode == "file" {
					fileBytes = max(fileBytes, fileSize(path)+fileSize(path+"-wal"))
				}
				b.StartTimer()

				start, cpu = time.Now(), cpuTime()
				heads := make([][]hostqueue.Entry, hosts)
				for h, k := range keys {
					st, err := s.Load(ctx, k, commitSize)
					if err != nil {
						b.Fatal(err)
					}
					heads[h] = st.Head
				}
				for left := hosts; left > 0; {
					for v := range hostqueue.VirtualShards {
						if _, err := s.DueHosts(ctx, v, now, 1000); err != nil {
							b.Fatal(err)
						}
					}
					for h, k := range keys {
						if heads[h] == nil {
							continue
						}
						done := make([]string, len(heads[h]))
						for i, e := range heads[h] {
							done[i] = e.ID
						}
						now = now.Add(time.Millisecond)
						st, err := s.Commit(ctx, k, hostqueue.Commit{Done: done, Want: commitSize, State: politeness.State{LastFetch: now}})
						if err != nil {
							b.Fatal(err)
						}
						heads[h] = st.Head
						if st.Pending == 0 {
							if _, err := s.Commit(ctx, k, hostqueue.Commit{Release: true, IdleTTL: 24 * time.Hour}); err != nil {
								b.Fatal(err)
							}
							heads[h] = nil
							left--
						}
					}
				}
				drainTime += time.Since(start)
				drainCPU += cpuTime() - cpu
				b.StopTimer()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			n := float64(b.N) * urls
			b.ReportMetric(float64(appendTime.Nanoseconds())/n, "append-ns/url")
			b.ReportMetric(float64(drainTime.Nanoseconds())/n, "drain-ns/url")
			b.ReportMetric(float64(appendCPU.Nanoseconds())/n, "append-cpu-ns/url")
			b.ReportMetric(float64(drainCPU.Nanoseconds())/n, "drain-cpu-ns/url")
			if mode == "file" {
				b.ReportMetric(float64(fileBytes)/(1<<20), "file-MB")
			}
			var ru syscall.Rusage
			if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
				b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB")
			}
		})
	}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// cpuTime is the CPU time the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
