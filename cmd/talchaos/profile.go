package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// envCPUProfile names a file to write a CPU profile of the whole process to
// (make bench's profiles, docs/measurements.md). A developer's knob, not a
// flag: users never need it, and a flag on every command would say otherwise.
const envCPUProfile = "TALCHAOS_CPUPROFILE"

// startProfile starts the CPU profile envCPUProfile asks for and returns what
// stops it; a profile that cannot start is said on stderr and skipped.
func startProfile() func() {
	path := os.Getenv(envCPUProfile)
	if path == "" {
		return func() {}
	}

	f, err := os.Create(path) //nolint:gosec // the developer's own path
	if err != nil {
		fmt.Fprintln(os.Stderr, "talchaos: "+envCPUProfile+":", err)

		return func() {}
	}

	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "talchaos: "+envCPUProfile+":", err)
		f.Close() //nolint:errcheck,gosec

		return func() {}
	}

	return func() {
		pprof.StopCPUProfile()
		f.Close() //nolint:errcheck,gosec
	}
}
