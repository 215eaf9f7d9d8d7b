// Package netfault holds talchaos's own toxiproxy toxics:
//
//   - "talchaos_gate" cuts connections into a proxy by sender, the sender being
//     the CN of the TLS 1.2 client certificate seen on the wire (partitions
//     between etcd members, whose raft transport dials in both directions);
//   - "talchaos_latency" is toxiproxy's latency toxic with its jitter drawn from
//     a seeded PRNG, so a run can be replayed from its seed.
//
// Importing the package registers both types with toxiproxy.
package netfault

import (
	"encoding/json"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// Toxic type names, as used in the "type" field of a toxic definition.
const (
	GateType    = "talchaos_gate"
	LatencyType = "talchaos_latency"
)

func init() {
	toxics.Register(GateType, new(GateToxic))
	toxics.Register(LatencyType, new(LatencyToxic))
}

// toxicDef is the JSON toxiproxy's ToxicCollection.AddToxicJson reads.
type toxicDef struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Stream string `json:"stream"`
	// Always 1: below 1 toxiproxy rolls its global math/rand on every (re)start
	// of the toxic on a connection and may swap in a no-op, which no seed controls.
	Toxicity   float32 `json:"toxicity"`
	Attributes any     `json:"attributes"`
}

func (d toxicDef) marshal() []byte {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // plain strings and numbers: cannot happen
	}

	return b
}
