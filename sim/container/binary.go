package container

import (
	"debug/elf"
	"fmt"
	"os"
)

// staticBinary reads the talchaos binary the image carries. A scratch image
// has no dynamic loader and no libc: a binary with an interpreter would not
// start, so it is refused with how to get a static one.
func staticBinary(path string) ([]byte, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("node binary %s: %w", path, err)
	}
	defer f.Close() //nolint:errcheck

	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("node binary %s is dynamically linked; the container target needs a static one: "+
				"build it with CGO_ENABLED=0 (make build does) or set TALCHAOS_NODE_BINARY", path)
		}
	}

	return os.ReadFile(path)
}
