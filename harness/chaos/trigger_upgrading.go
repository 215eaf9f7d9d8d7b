package chaos

import "github.com/siderolabs/talos/pkg/machinery/resources/runtime"

// Upgrading is the trigger state "upgrading": the node's MachineStatus says
// it runs the upgrade sequence (from its drain to its reboot), so a fault can
// strike a node mid-upgrade.
type Upgrading struct{ isState }

var _ = registerState(Upgrading{})

func (Upgrading) Name() string { return "upgrading" }
func (Upgrading) Doc() string {
	return "the node runs the upgrade sequence (its MachineStatus stage is upgrading)"
}

func (Upgrading) Describe(node string, _ int) string { return node + " is upgrading" }

func (Upgrading) Holds(v View, node string, _ int) bool {
	return v.Obs.Nodes[node].Stage == runtime.MachineStageUpgrading.String()
}
