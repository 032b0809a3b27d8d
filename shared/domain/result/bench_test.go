//go:build unix

package result_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/htmlcorpus"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// BenchmarkPack is the CPU a result's packing costs per byte of body, on
// real HTML (or a generated page where none is installed): plain (a UTF-8 scan
// and a copy) against gzip (BestSpeed, then base64). The ratio is what
// the data field keeps of plain's size; cpu-ns/B the process's CPU time
// (user and system, the collector's included) per byte of body, which a
// busy machine disturbs less than the wall time of ns/op.
//
//	go test -run '^$' -bench Pack -benchtime 2x ./shared/domain/result/
func BenchmarkPack(b *testing.B) {
	// Real HTML installed offline (internal/htmlcorpus), each file at
	// most InlineBodyBytes: a longer body streams to the body store
	// before it is packed.
	files, _ := htmlcorpus.Files(params.DefaultInlineBodyBytes)
	if len(files) == 0 {
		files = [][]byte{page(30 << 10), page(100 << 10)}
	}
	var raw int64
	for _, f := range files {
		raw += int64(len(f))
	}
	var plain int64
	for _, f := range files {
		plain += result.InlineSize(f)
	}
	for _, enc := range []params.BodyEncoding{params.BodyPlain, params.BodyGzip} {
		b.Run(string(enc), func(b *testing.B) {
			b.SetBytes(raw)
			var packed int64
			cpu0 := cpuTime()
			for b.Loop() {
				packed = 0
				for _, f := range files {
					packed += result.Pack(f, enc).Size
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(int64(b.N)*raw), "cpu-ns/B")
			b.ReportMetric(float64(packed)/float64(plain), "size/plain")
			b.ReportMetric(float64(len(files)), "files")
		})
	}
}

// cpuTime is the CPU the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
