package cli

// The results file and the state's lock, as the runner tells of them: the
// rules live in package standalone (outfile.go, lock.go); this file gives
// the flag and the messages.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
)

var Overwrite = flag.Bool("overwrite", false, "empty an existing --out file of another job (or none) and start it anew; the job that wrote it (its --state) always appends; without it, a non-empty --out of another job is refused")

// CreateOut opens --out for the moto backend, which has no state to resume.
func CreateOut(path string) (*os.File, error) {
	return localmode.CreateOut(path, *Overwrite)
}

// ExplainOpenError adds, after a refused results file or a busy state, what
// to do about it.
func ExplainOpenError(w io.Writer, err error) {
	var conflict *localmode.OutConflictError
	var busy *localmode.BusyError
	var damaged *localmode.StateDamagedError
	var outBusy *localmode.OutBusyError
	switch {
	case errors.As(err, &damaged):
		fmt.Fprintf(w, "urldownloader: running again will not mend it: move %s away (keep it if its job matters) to start a new job, or give another --state\n", damaged.State)
	case errors.As(err, &outBusy):
		fmt.Fprintf(w, "urldownloader: nothing was written; wait for that job to end (or stop it with Ctrl-C), or give another --out\n")
	case errors.As(err, &conflict) && conflict.Recorded != "":
		fmt.Fprintf(w, "urldownloader: to continue this job, give --out %s; to send the rest of its results to %s instead, add --overwrite (it is emptied first); or choose another --state for a new job\n",
			conflict.Recorded, outName(conflict.Out))
	case errors.As(err, &conflict) && conflict.State != "":
		fmt.Fprintf(w, "urldownloader: nothing was written; to continue the job that wrote %s, give its --state; to empty it and start anew, add --overwrite; or choose another --out\n", conflict.Out)
	case errors.As(err, &conflict):
		fmt.Fprintf(w, "urldownloader: nothing was written; to empty %s and start anew, add --overwrite; or choose another --out\n", conflict.Out)
	case errors.As(err, &busy):
		fmt.Fprintf(w, "urldownloader: wait for that run to end (or stop it with Ctrl-C), or give another --state; the lock is %s%s\n", busy.State, localmode.LockSuffix)
	}
}

func outName(path string) string {
	if path == "" {
		return "standard output"
	}
	return path
}

// ExplainDiskFault says what a disk fault stopped and what to do: one
// message, whatever was being written.
func ExplainDiskFault(w io.Writer, fault *localmode.DiskFaultError, rep localmode.Report, state string) {
	dir := fault.Path
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = filepath.Dir(dir)
	}
	fix := "free space on " + dir
	if !fault.Full() {
		fix = "make " + dir + " writable again (or replace the failing disk)"
	}
	fmt.Fprintf(w, "urldownloader: stopped: %s: %s; %s and run the same command again: nothing was lost, the %d urls without a result are still queued in %s, and no result is written twice\n",
		fault.Where, fault.Cause(), fix, rep.MissingCount, state)
}
