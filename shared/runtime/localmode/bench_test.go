package localmode

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkFeed reads 100,000 URLs over 1,000 hosts into a file state (no
// check loop runs): the time before the last host can start.
func BenchmarkFeed(b *testing.B) {
	var sb strings.Builder
	for h := range 1000 {
		for p := range 100 {
			fmt.Fprintf(&sb, "{\"url\": \"http://h%d.example/page/%d\"}\n", h, p)
		}
	}
	lines := sb.String()
	for b.Loop() {
		dir := b.TempDir()
		rt, err := Open(context.Background(), Options{State: filepath.Join(dir, "state.db"), Out: nil})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		rep, err := rt.feed(context.Background(), Input{Name: "bench", R: strings.NewReader(lines)}, make(chan struct{}))
		if err != nil || rep.URLs != 100000 {
			b.Fatal(rep, err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/100k")
		rt.Close()
	}
}
