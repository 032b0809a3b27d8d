package rie

import (
	"strings"
	"testing"
)

// TestEphemeralStorage: the function's temporary directory holds
// EphemeralStorageMB and refuses more with ENOSPC, as Lambda's /tmp does;
// by default it is Lambda's 512 MB, not the host's disk.
func TestEphemeralStorage(t *testing.T) {
	e := startFn(t, Options{EphemeralStorageMB: 2})
	mustInvoke(t, e, `{"op":"fill","bytes":1000000}`)
	_, err := invoke(t, e, `{"op":"fill","bytes":3000000}`)
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("3 MB into a 2 MB /tmp: %v, want no space left on device", err)
	}
	a := mustInvoke(t, e, `{"op":"env"}`)
	if a.Env["TMPDIR"] == "" {
		t.Errorf("TMPDIR not set for the function: %v", a.Env)
	}

	d := startFn(t, Options{})
	mustInvoke(t, d, `{"op":"fill","bytes":3000000}`)
	if DefaultEphemeralStorageMB != 512 {
		t.Errorf("DefaultEphemeralStorageMB = %d, want Lambda's 512", DefaultEphemeralStorageMB)
	}
}
