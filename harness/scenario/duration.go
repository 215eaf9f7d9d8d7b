package scenario

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/talchaos/talchaos/harness/strictyaml"
)

// UnmarshalYAML accepts a Go duration string ("90s", "10m", "1h30m") or a plain 0.
// Other bare numbers are refused: "90" is ambiguous between seconds and minutes, and
// a wrong guess silently changes what a scenario tests.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a duration like \"90s\", got %s", strictyaml.Describe(n))
	}

	if n.ShortTag() == "!!null" {
		d.Duration = 0

		return nil
	}

	if n.ShortTag() == "!!int" || n.ShortTag() == "!!float" {
		if n.Value == "0" {
			d.Duration = 0

			return nil
		}

		return fmt.Errorf("duration %s needs a unit, e.g. \"%ss\"", n.Value, n.Value)
	}

	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", n.Value, err)
	}

	if v < 0 {
		return fmt.Errorf("negative duration %q", n.Value)
	}

	d.Duration = v

	return nil
}

// MarshalYAML writes the duration back in the form UnmarshalYAML reads.
func (d Duration) MarshalYAML() (any, error) {
	return d.String(), nil
}

// String is the Go duration string ("1m30s").
func (d Duration) String() string {
	return d.Duration.String()
}
