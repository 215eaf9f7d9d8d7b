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
		field, role, noun string
		isRole            func(string) bool
	}{
		{"cluster.controlPlanes", roleControlPlane, "control plane", scenario.IsControlPlane},
		{"cluster.workers", roleWorker, "worker", isWorkerName},
	} {
		// needed are the scenario's nodes of this role the inventory does not
		// provide; listedAs says where it lists those it has in another role.
		var needed, listedAs []string

		for _, name := range sc.Cluster.NodeNames() {
			if !g.isRole(name) {
				continue
			}

			n, ok := inv.Node(name)

			switch {
			case !ok:
				needed = append(needed, name)
			case n.Role != g.role:
				needed = append(needed, name)
				listedAs = append(listedAs, fmt.Sprintf("%s is listed as a %s (%s)", name, n.Role, inv.where(inv.nodeField(name, "role"))))
			}
		}

		if len(needed) == 0 {
			continue
		}

		var have []string

		for _, n := range inv.Nodes {
			if n.Role == g.role {
				have = append(have, n.Name)
			}
		}

		noun := g.noun
		if len(have) != 1 {
			noun += "s"
		}

		msg := fmt.Sprintf("the inventory lists %d %s", len(have), noun)
		if len(have) > 0 {
			msg += " (" + strings.Join(have, ", ") + ")"
		}

		msg += "; the scenario needs " + strings.Join(needed, ", ")

		for _, l := range listedAs {
			msg += "; " + l
		}

		errs = append(errs, sc.Errorf(g.field, "%s", msg))
	}

	// A scenario that says where its nodes are must be about these nodes:
	// each one's inventory address is one of its addresses there.
	all := sc.Cluster.NodeAddresses()

	for _, name := range sc.Cluster.NodeNames() {
		addrs := all[name]

		n, ok := inv.Node(name)
		if !ok || addrs == nil {
			continue
		}

		var mine []string

		found := false

		for _, a := range addrs {
			mine = append(mine, a.Addr.String())
			found = found || a.Addr.String() == n.Address
		}

		if !found {
			errs = append(errs, sc.Errorf("cluster.network", "%s is at %s (%s), not at one of the scenario's addresses for it (%s)",
				name, n.Address, inv.where(inv.nodeField(name, "address")), strings.Join(mine, ", ")))
		}
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
