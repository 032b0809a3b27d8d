package main

// The results file and the state's lock, as the runner tells of them: the
// rules live in package standalone (outfile.go, lock.go); this file gives
// the flag and the messages.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urldownloader/urldownloader/infra/standalone"
)

var overwriteFlag = flag.Bool("overwrite", false, "empty an existing --out file of another job (or none) and start it anew; the job that wrote it (its --state) always appends; without it, a non-empty --out of another job is refused")

// createOut opens --out for the moto backend, which has no state to resume.
func createOut(path string) (*os.File, error) {
	return standalone.CreateOut(path, *overwriteFlag)
}

// explainOpenError adds, after a refused results file or a busy state, what
// to do about it.
func explainOpenError(w io.Writer, err error) {
	var conflict *standalone.OutConflictError
	var busy *standalone.BusyError
	switch {
	case errors.As(err, &conflict) && conflict.Recorded != "":
		fmt.Fprintf(w, "urldownloader: to continue this job, give --out %s; to send the rest of its results to %s instead, add --overwrite (it is emptied first); or choose another --state for a new job\n",
			conflict.Recorded, outName(conflict.Out))
	case errors.As(err, &conflict) && conflict.State != "":
		fmt.Fprintf(w, "urldownloader: nothing was written; to continue the job that wrote %s, give its --state; to empty it and start anew, add --overwrite; or choose another --out\n", conflict.Out)
	case errors.As(err, &conflict):
		fmt.Fprintf(w, "urldownloader: nothing was written; to empty %s and start anew, add --overwrite; or choose another --out\n", conflict.Out)
	case errors.As(err, &busy):
		fmt.Fprintf(w, "urldownloader: wait for that run to end (or stop it with Ctrl-C), or give another --state; the lock is %s%s\n", busy.State, standalone.LockSuffix)
	}
}

func outName(path string) string {
	if path == "" {
		return "standard output"
	}
	return path
}

// printRecovery tells what Open found: the results file appended to or
// repaired, and the leases of a run that died on the state.
func printRecovery(w io.Writer, rt *standalone.Runtime) {
	o := rt.OutFile()
	switch {
	case o.Overwritten:
		fmt.Fprintf(w, "urldownloader: --overwrite: emptied %s\n", o.Path)
	case o.Unrecorded:
		fmt.Fprintf(w, "urldownloader: appending to %s (this state did not record a results file before)\n", o.Path)
	case o.Appended:
		fmt.Fprintf(w, "urldownloader: appending to %s after the %d results earlier runs of this job wrote\n", o.Path, o.Earlier)
	}
	if o.OverwriteIgnored {
		fmt.Fprintf(w, "urldownloader: --overwrite not applied: %s holds this job's own results, and the job goes on (a new --state starts a new job)\n", o.Path)
	}
	if o.Cut > 0 {
		fmt.Fprintf(w, "urldownloader: %s ended in a partial line of %d bytes (a write cut by a crash, never committed): removed; its url gets its result again\n", o.Path, o.Cut)
	}
	if o.Terminated > 0 {
		fmt.Fprintf(w, "urldownloader: %s ended in a partial line, which this state did not write: ended it with a newline, kept its bytes\n", o.Path)
	}
	if t := rt.Takeover(); t.Leases > 0 {
		fmt.Fprintf(w, "urldownloader: the last run on this state ended without stopping (killed?): took over its %d shard leases at once (they ran to %s); its %d hosts with queued urls keep their delay from now\n",
			t.Leases, t.Until.Local().Format(time.TimeOnly), t.Hosts)
	}
}
