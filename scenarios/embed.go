// Package scenarios holds the built-in scenario files and the suite that runs
// every one of them.
package scenarios

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/scenario"
)

//go:embed *.yaml
var files embed.FS

// FS is the built-in scenario files.
func FS() fs.FS { return files }

// Names lists the built-in scenarios (file names without .yaml), sorted.
func Names() []string {
	entries, _ := fs.ReadDir(files, ".") //nolint:errcheck // embedded, cannot fail

	var out []string

	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") {
			out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
		}
	}

	sort.Strings(out)

	return out
}

// Read returns a built-in scenario by name, and the path it is known by.
func Read(name string) ([]byte, string, error) {
	file := path.Clean(strings.TrimSuffix(name, ".yaml") + ".yaml")
	data, err := fs.ReadFile(files, file)

	return data, "scenarios/" + file, err
}

// Load is a built-in scenario by name, parsed and validated.
func Load(name string) (*scenario.Scenario, error) {
	data, file, err := Read(name)
	if err != nil {
		return nil, err
	}

	return chaos.Parse(file, data)
}
