//go:build unix && !linux

package rie

import "os/exec"

// childPIDs needs /proc; elsewhere Close relies on the emulator's SIGTERM
// handling to stop the function.
func childPIDs(*exec.Cmd) []int { return nil }

// runtimePeakMB needs /proc.
func runtimePeakMB(*exec.Cmd) int { return 0 }
