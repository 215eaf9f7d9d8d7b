package netfault

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/talchaos/talchaos/harness/target"
)

var toxicSeq atomic.Int64

// AddToxic puts a target.Toxic on a toxiproxy proxy and returns how to remove
// it. Latency uses talchaos's seeded latency toxic; the rest are toxiproxy's own,
// always with toxicity 1 (toxiproxy's randomness is never used).
func AddToxic(p *Proxy, t target.Toxic) (func() error, error) {
	direction := string(t.Direction)
	if direction == "" {
		direction = string(target.Downstream)
	}

	name := fmt.Sprintf("%s-%s-%d", t.Type, direction, toxicSeq.Add(1))

	var body []byte

	attrs := map[string]any{}

	switch t.Type {
	case "latency":
		body = LatencyToxicJSON(name, direction, t.Latency, t.Jitter, t.JitterSeed)
	case "bandwidth":
		attrs["rate"] = t.RateKBps
	case "timeout", "reset_peer":
		attrs["timeout"] = t.Timeout.Milliseconds()
	case "slow_close":
		attrs["delay"] = t.Timeout.Milliseconds()
	default:
		return nil, fmt.Errorf("unsupported toxic type %q", t.Type)
	}

	if body == nil {
		var err error

		body, err = json.Marshal(map[string]any{"name": name, "type": t.Type, "stream": direction, "toxicity": 1.0, "attributes": attrs})
		if err != nil {
			return nil, err
		}
	}

	if _, err := p.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
		return nil, fmt.Errorf("add toxic: %w", err)
	}

	return func() error { return p.Toxics.RemoveToxic(context.Background(), name) }, nil
}
