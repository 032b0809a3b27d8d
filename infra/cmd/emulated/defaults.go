package main

import (
	"fmt"
	"os"
	"time"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/shared/runtime/cli"
)

// The moto backend's defaults where local mode has others (a flag's own
// default is 0, "the mode's default"). A moto run is a test rig: it gives
// up after motoTimeout; local mode runs until done.
const (
	motoTimeout  = 10 * time.Minute
	motoCheckRun = 20 * time.Second
	// faultCheckRun is infra/emulated's default, used by a fault run: short
	// invocations, so killed ones' leases expire quickly.
	faultCheckRun = 3 * time.Second
)

// applyMotoDefaults gives the flags whose defaults differ by mode the moto
// backend's values, unless given.
func applyMotoDefaults(timeout, checkRun *time.Duration) {
	if !cli.FlagSet("timeout") {
		*timeout = motoTimeout
	}
	if !cli.FlagSet("check-run") {
		*checkRun = motoCheckRun
	}
}

// motoMissing reports, and says how to get it, when --backend moto has no
// moto to start (and no --endpoint of a running one).
func motoMissing(endpoint string) bool {
	if endpoint != "" {
		return false
	}
	_, err := moto.FindServer()
	if err == nil {
		return false
	}
	fmt.Fprintf(os.Stderr, "urldownloader: the emulated stack runs the AWS emulator moto, which was not found (%v)\n", err)
	fmt.Fprintln(os.Stderr, "urldownloader: install it with `make tools` in the checkout (into .venv), or set MOTO_SERVER=/path/to/moto_server")
	return true
}
