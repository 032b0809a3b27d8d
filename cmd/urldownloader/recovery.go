package main

import (
	"fmt"
	"io"
	"time"

	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
)

// printRecovery tells what Open found: the results file appended to or
// repaired, and the leases of a run that died on the state.
func printRecovery(w io.Writer, rt *localmode.Runtime) {
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
