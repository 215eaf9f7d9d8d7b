package real

import (
	"fmt"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"

	"github.com/talchaos/talchaos/harness/inputfile"
)

// ReadTalosconfig reads a talosconfig as untrusted input: a regular file of
// at most inputfile.MaxConfigBytes (a FIFO is refused, never waited on),
// loaded with the machinery without creating it when it is missing (as
// clientconfig.Open would). Errors name the file and never quote what is in
// it: a talosconfig holds a client key.
func ReadTalosconfig(path string) (*clientconfig.Config, error) {
	data, err := inputfile.Read(path, inputfile.MaxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("talosconfig %s", describeFileError(err, path))
	}

	cfg, err := clientconfig.FromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("talosconfig %s is not a talosconfig: %s", showPath(path), redact(err))
	}

	if len(cfg.Contexts) == 0 {
		return nil, fmt.Errorf("talosconfig %s has no contexts", showPath(path))
	}

	return cfg, nil
}
