package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/moto"
)

// TestWarcSmoke runs the WARC part at tiny sizes, so `make test` keeps
// `make bench -only warc` working: local mode writes WARC files with and
// without a cost in results, WarcOutput on moto leaves segments in the
// bucket and no object per body, and the section is written in place.
func TestWarcSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto and local mode")
	}
	// Only bounds a hang (the part takes about 20 s alone).
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	srv, err := moto.StartWith(ctx, moto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	root, err := moto.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	e := &benchEnv{cfg: SmokeConfig(), moto: srv, root: root, log: slog.New(slog.NewTextHandler(&log, nil))}
	defer func() { e.local.Close() }()
	res, err := e.warc(ctx, WarcConfig{Hosts: 4, Bodies: []BodySize{{"300 KB", 300_000, 4, 2}}})
	if err != nil {
		t.Fatalf("warc: %v\nlog:\n%s", err, log.String())
	}
	l := res.Local
	urls := l.Hosts * l.PerHost
	if l.Off.Results["fetched"] != urls || l.On.Results["fetched"] != urls || l.Files == 0 || l.WarcBytes <= 0 {
		t.Errorf("local: %v without --warc, %v with, %d files of %d bytes: want %d fetched each and a WARC file", l.Off.Results, l.On.Results, l.Files, l.WarcBytes, urls)
	}
	if len(res.Bodies) != 2 || res.Bodies[0].Warc || !res.Bodies[1].Warc {
		t.Fatalf("bodies: %d runs, want one without and one with WarcOutput", len(res.Bodies))
	}
	off, on := res.Bodies[0], res.Bodies[1]
	if off.Stored != 4 || off.StoredBytes != 4*300_000 || off.Segments != 0 {
		t.Errorf("object per body: %d stored, %d bytes, %d segments: want 4 bodies of 300 KB, no segment", off.Stored, off.StoredBytes, off.Segments)
	}
	if on.Stored != 4 || on.StoredBytes != 0 || on.Segments == 0 || on.WarcBytes < 4*300_000 {
		t.Errorf("WarcOutput: %d stored, %d bytes in objects, %d segments of %d bytes: want the 4 bodies in records only", on.Stored, on.StoredBytes, on.Segments, on.WarcBytes)
	}
	out := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := os.WriteFile(out, []byte("# B\n\n"+warcSection.begin()+"\nold\n"+warcSection.end()+"\n\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeWarc(out, res, Machine{}); err != nil {
		t.Fatal(err)
	}
	doc, _ := os.ReadFile(out)
	if s := string(doc); strings.Contains(s, "old") || !strings.HasSuffix(s, warcSection.end()+"\n\nafter\n") || !strings.Contains(s, "`WarcOutput` (") || !strings.Contains(s, "with `--warc`") {
		t.Errorf("section not replaced in place:\n%s", s)
	}
}
