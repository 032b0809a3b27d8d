package sqlite_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
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
//	go test -run '^$' -bench LocalRun -benchtime 1x ./shared/embedded/sqlite/
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

// BenchmarkIngestUnderLoad appends an ingest batch of 50,000 URLs over
// 10,000 hosts while 3,000 goroutines load and commit hosts as the check
// engine's workers do, through the Ingester both ways: one append per
// host, 256 at a time ("single"), and the whole batch handed to
// AppendBatch ("batch"). It reports the batch's seconds and the workers'
// operations per second meanwhile. On the 2-core machine of
// docs/benchmarks.md: single 9-16 s, batch 1.5-1.6 s, the workers at
// 7,000-18,000 operations/s (see AppendChunk).
//
//	go test -run '^$' -bench IngestUnderLoad -benchtime 1x ./shared/embedded/sqlite/
func BenchmarkIngestUnderLoad(b *testing.B) {
	const hosts, perHost, workers = 10_000, 5, 3_000
	for _, mode := range []string{"single", "batch"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				now := time.UnixMilli(1_760_000_000_000)
				s, err := sqlite.New(filepath.Join(b.TempDir(), "state.db"), func() time.Time { return now })
				if err != nil {
					b.Fatal(err)
				}
				ctx := b.Context()
				keys := make([]string, hosts)
				for i := range keys {
					keys[i] = fmt.Sprintf("h%05d.example", i)
					e := hostqueue.Entry{ID: keys[i] + "-0", URL: "http://" + keys[i] + "/0"}
					if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: keys[i], Entries: []hostqueue.Entry{e}, Limit: 1000, HoldBack: true, Due: now}); err != nil {
						b.Fatal(err)
					}
				}
				var stop atomic.Bool
				var ops atomic.Int64
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() {
						for i := w; !stop.Load(); i += workers {
							k := keys[i%hosts]
							if _, err := s.Load(ctx, k, 20); err == nil {
								_, _ = s.Commit(ctx, k, hostqueue.Commit{Want: 20})
							}
							ops.Add(2)
						}
					})
				}
				var msgs []urlmsg.Message
				for i := range perHost {
					for _, k := range keys {
						msgs = append(msgs, urlmsg.Message{ID: fmt.Sprintf("%s-b%d", k, i), Host: k, URL: fmt.Sprintf("http://%s/b%d", k, i)})
					}
				}
				var store hostqueue.Appender = s
				if mode == "single" {
					store = struct{ hostqueue.Appender }{s} // hides AppendBatch
				}
				in := &hostqueue.Ingester{Store: store, Now: func() time.Time { return now }, Concurrency: sqlite.GroupSize, Overflow: hostqueue.HoldBack}
				time.Sleep(time.Second) // the workers' queue fills
				b.StartTimer()
				o0, start := ops.Load(), time.Now()
				res := in.Ingest(ctx, hostqueue.IngestParams{PersistLimit: 1000}, msgs)
				took, done := time.Since(start), ops.Load()-o0
				b.StopTimer()
				stop.Store(true)
				wg.Wait()
				if len(res.Failed) > 0 || res.Appended != len(msgs) {
					b.Fatalf("%d appended, %d failed, want all %d appended", res.Appended, len(res.Failed), len(msgs))
				}
				b.ReportMetric(took.Seconds(), "s/batch")
				b.ReportMetric(float64(done)/took.Seconds(), "worker-ops/s")
				s.Close()
			}
		})
	}
}
