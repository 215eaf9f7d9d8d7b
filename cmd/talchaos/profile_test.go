package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/google/pprof/profile"
)

// The heap profile is the one taken at the live heap's peak, not the last:
// a buffer held for a while and dropped before the end is in it.
func TestHeapProfileAtThePeak(t *testing.T) {
	var h heapPeak

	h.look()

	held := make([][]byte, 0, 64)
	for range 64 {
		held = append(held, bytes.Repeat([]byte{1}, 1<<20)) // 64 MiB live
	}

	// The live heap and the heap profile are as of the last collection.
	runtime.GC()
	h.look()

	for i := range held {
		held[i][0]++
	}

	held = nil //nolint:ineffassign,wastedassign // dropped before the end

	runtime.GC()
	h.look()

	p, err := profile.Parse(bytes.NewReader(h.profile.Bytes()))
	if err != nil {
		t.Fatal(err)
	}

	i := slices.IndexFunc(p.SampleType, func(st *profile.ValueType) bool { return st.Type == "inuse_space" })
	if i < 0 {
		t.Fatalf("no inuse_space in %v", p.SampleType)
	}

	var inuse int64
	for _, s := range p.Sample {
		inuse += s.Value[i]
	}

	if inuse < 48<<20 {
		t.Errorf("the profile holds %d MiB in use, want the 64 MiB held before the end", inuse>>20)
	}
}

func TestHeapProfileEndedBeforeTheFirstLook(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.prof")
	startHeapProfile(path)()

	if data, err := os.ReadFile(path); err != nil || len(data) == 0 {
		t.Fatalf("no profile written: %v (%d bytes)", err, len(data))
	}
}
