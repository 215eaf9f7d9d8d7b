package chaos

import (
	"context"
	"time"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// ClockOffset sets a node's clock ahead of or behind the true time (a board
// without a real-time clock, a wrong time source: talos #3033, #6462). The
// node's TLS reads that clock: the certificates it issues from then on (its
// API certificate, its etcd certificates) are valid from its time, and it
// checks its clients' and peers' certificates against its time, so TLS to and
// from it fails with Go's "x509: certificate has expired or is not yet valid:
// current time … is before …" (or "is after …").
//
// Not modelled: the node's embedded etcd checks its peers' and clients'
// certificates against the true time (etcd's TLS takes no clock); certificates
// the node issued before the fault keep their validity until it issues new
// ones (its API certificate when it leaves maintenance or boots, its etcd
// certificates when etcd starts); a time server that answers does not step
// the clock back (use time-unsynced to say it does not answer); Kubernetes'
// certificates.
type ClockOffset struct {
	Node   Node              `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
	Ahead  scenario.Duration `yaml:"ahead" doc:"the node's clock is this far ahead of the true time (real time, not scaled); or behind"`
	Behind scenario.Duration `yaml:"behind" doc:"the node's clock is this far behind the true time (real time, not scaled); or ahead"`
}

// maxClockOffset bounds an offset: a century covers a board that boots in 1970.
const maxClockOffset = 100 * 365 * 24 * time.Hour

func (ClockOffset) Kind() string      { return "clock-offset" }
func (ClockOffset) Destructive() bool { return false }
func (ClockOffset) Doc() string {
	return "set a node's clock ahead of or behind the true time: the certificates it issues and the ones it checks are judged " +
		"by its clock, so TLS to and from it fails (x509: certificate has expired or is not yet valid)"
}

func (ClockOffset) Example() string { return "{kind: clock-offset, node: cp2, ahead: 8760h, at: 0s}" }

func (ClockOffset) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.OffsetClock}
}

func (k ClockOffset) Validate(c *scenario.FaultCheck) {
	c.Node("node", string(k.Node), true)

	switch {
	case k.Ahead.Duration == 0 && k.Behind.Duration == 0:
		c.Errorf("ahead", "required: ahead or behind, a duration up to %s", maxClockOffset)
	case k.Ahead.Duration != 0 && k.Behind.Duration != 0:
		c.Errorf("behind", "give ahead or behind, not both")
	case k.Ahead.Duration != 0:
		c.Duration("ahead", k.Ahead, time.Second, maxClockOffset)
	default:
		c.Duration("behind", k.Behind, time.Second, maxClockOffset)
	}
}

// Offset is the node's clock minus the true time.
func (k ClockOffset) Offset() time.Duration { return k.Ahead.Duration - k.Behind.Duration }

func (k ClockOffset) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	cl, err := clocks(env)
	if err != nil {
		return nil, err
	}

	return cl.OffsetClock(ctx, string(k.Node), k.Offset())
}
