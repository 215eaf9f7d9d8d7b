package real

import (
	"fmt"
	"strings"

	"github.com/talchaos/talchaos/harness/scenario"
)

// CheckScenario reports whether the inventory has every node the scenario
// needs (cp1..cpN as control planes, w1..wM as workers). It is a pure function
// of the two, so that a run is refused before anything starts; the error names
// the scenario's field (file:line) and says what the inventory has.
func (inv *Inventory) CheckScenario(sc *scenario.Scenario) error {
	var errs scenario.Errors

	for _, g := range []struct {
		field, role, plural string
		isRole              func(string) bool
	}{
		{"cluster.controlPlanes", roleControlPlane, "control planes", scenario.IsControlPlane},
		{"cluster.workers", roleWorker, "workers", isWorkerName},
	} {
		var missing, wrong, wrongAs []string

		for _, name := range sc.Cluster.NodeNames() {
			if !g.isRole(name) {
				continue
			}

			n, ok := inv.Node(name)

			switch {
			case !ok:
				missing = append(missing, name)
			case n.Role != g.role:
				wrong = append(wrong, name)
				wrongAs = append(wrongAs, fmt.Sprintf("%s as a %s (%s)", name, n.Role, inv.where(inv.nodeField(name, "role"))))
			}
		}

		if len(missing) == 0 && len(wrong) == 0 {
			continue
		}

		var have []string

		for _, n := range inv.Nodes {
			if n.Role == g.role {
				have = append(have, n.Name)
			}
		}

		msg := fmt.Sprintf("the inventory lists %d %s", len(have), g.plural)
		if len(have) > 0 {
			msg += " (" + strings.Join(have, ", ") + ")"
		}

		if len(missing) > 0 {
			msg += "; the scenario needs " + strings.Join(missing, ", ")
		}

		if len(wrong) > 0 {
			msg += fmt.Sprintf("; the scenario needs %s as %s, the inventory lists %s", strings.Join(wrong, ", "), g.plural, strings.Join(wrongAs, ", "))
		}

		errs = append(errs, sc.Errorf(g.field, "%s", msg))
	}

	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}

	return errs
}

// nodeField is the field path of a field of the named node ("nodes[2].role").
func (inv *Inventory) nodeField(name, field string) string {
	for i, n := range inv.Nodes {
		if n.Name == name {
			return fmt.Sprintf("nodes[%d].%s", i, field)
		}
	}

	return "nodes"
}
