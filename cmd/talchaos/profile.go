package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"
)

// envCPUProfile names a file to write a CPU profile of the whole process to
// (make bench's profiles, docs/measurements.md). A developer's knob, not a
// flag: users never need it, and a flag on every command would say otherwise.
const envCPUProfile = "TALCHAOS_CPUPROFILE"

// envHeapProfile names a file to write the heap profile taken when the live
// heap was largest: what holds a run's peak memory (Step 14's RSS ratio).
// A heap profile written at exit would show a cluster already torn down.
const envHeapProfile = "TALCHAOS_HEAPPROFILE"

// heapSampleEvery is how often the live heap is read for envHeapProfile.
const heapSampleEvery = 100 * time.Millisecond

// startProfile starts the profiles envCPUProfile and envHeapProfile ask for
// and returns what stops them and writes them; a profile that cannot start is
// said on stderr and skipped.
func startProfile() func() {
	stopCPU, stopHeap := startCPUProfile(os.Getenv(envCPUProfile)), startHeapProfile(os.Getenv(envHeapProfile))

	return func() {
		stopCPU()
		stopHeap()
	}
}

// createProfile creates the file a profile knob names; nil (said on stderr)
// when it cannot, or when the knob is not set.
func createProfile(env, path string) *os.File {
	if path == "" {
		return nil
	}

	f, err := os.Create(path) //nolint:gosec // the developer's own path
	if err != nil {
		fmt.Fprintln(os.Stderr, "talchaos: "+env+":", err)

		return nil
	}

	return f
}

func startCPUProfile(path string) func() {
	f := createProfile(envCPUProfile, path)
	if f == nil {
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

// startHeapProfile reads the live heap every heapSampleEvery and keeps the
// heap profile of the largest seen; it is written to path when the command
// ends.
func startHeapProfile(path string) func() {
	f := createProfile(envHeapProfile, path)
	if f == nil {
		return func() {}
	}

	var (
		h    heapPeak
		done = make(chan struct{})
		wg   sync.WaitGroup
	)

	wg.Go(func() {
		t := time.NewTicker(heapSampleEvery)
		defer t.Stop()

		for {
			select {
			case <-done:
				return
			case <-t.C:
				h.look()
			}
		}
	})

	return func() {
		close(done)
		wg.Wait()
		h.look() // the end may be the peak, or come before the first tick

		if _, err := f.Write(h.profile.Bytes()); err != nil {
			fmt.Fprintln(os.Stderr, "talchaos: "+envHeapProfile+":", err)
		}

		f.Close() //nolint:errcheck,gosec
	}
}

// heapPeak is the heap profile taken when the live heap was largest. The
// profile is as of the last garbage collection, which is what the live-heap
// metric counts too.
type heapPeak struct {
	peak    uint64
	profile bytes.Buffer
}

// look reads the live heap and takes the profile if it is the largest yet.
func (h *heapPeak) look() {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)

	if live := sample[0].Value.Uint64(); live > h.peak || h.profile.Len() == 0 {
		h.peak = live

		h.profile.Reset()
		pprof.Lookup("heap").WriteTo(&h.profile, 0) //nolint:errcheck,gosec // a buffer does not fail
	}
}
