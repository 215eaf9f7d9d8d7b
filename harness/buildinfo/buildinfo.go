// Package buildinfo says which talchaos made a run: the module version and the
// VCS revision Go stamped into the binary. Every report records it, so a
// verdict can be traced to the code that reached it.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Info is the build of this binary.
type Info struct {
	// Version is the main module's version: a tag, a pseudo-version or
	// "(devel)" for a build from a work tree.
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from ("" when Go did
	// not stamp it, e.g. in `go test` binaries), Modified whether the work
	// tree had uncommitted changes.
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// Time is the commit time (RFC 3339).
	Time string `json:"time,omitempty"`
	// Go is the Go version that built it.
	Go string `json:"go"`
}

// Read returns the build of the running binary.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown"}
	}

	info := Info{Version: bi.Main.Version, Go: bi.GoVersion}
	if info.Version == "" {
		info.Version = "(devel)"
	}

	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		case "vcs.time":
			info.Time = s.Value
		}
	}

	return info
}

// String is one line: "talchaos (devel) 4d85ac5f1e2a+modified (go1.26.8)".
func (i Info) String() string {
	parts := []string{"talchaos", i.Version}

	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}

		if i.Modified {
			rev += "+modified"
		}

		parts = append(parts, rev)
	}

	if i.Go != "" {
		parts = append(parts, "("+i.Go+")")
	}

	return strings.Join(parts, " ")
}
