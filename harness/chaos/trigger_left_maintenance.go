package chaos

import "github.com/talchaos/talchaos/harness/history"

// LeftMaintenance is the trigger state "left-maintenance": the node's Talos API answers with mutual TLS.
type LeftMaintenance struct{ isState }

var _ = registerState(LeftMaintenance{})

func (LeftMaintenance) Name() string { return "left-maintenance" }
func (LeftMaintenance) Doc() string  { return "the node's Talos API answers with mutual TLS" }

func (LeftMaintenance) Describe(node string, _ int) string { return node + " is left-maintenance" }

func (LeftMaintenance) Holds(v View, node string, _ int) bool {
	return v.Obs.Nodes[node].Mode == history.ModeConfigured
}
