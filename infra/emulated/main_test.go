package emulated_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs the pipeline tests eight side by side unless -parallel
// says otherwise: they spend their time waiting (host delays, batching
// windows, the emulator), not on the CPU, so GOMAXPROCS (the default) would
// leave a 2-core machine idle while they run one after another.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "8")
	}
	os.Exit(m.Run())
}
