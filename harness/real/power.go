package real

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/talchaos/talchaos/harness/real/proxmox"
	"github.com/talchaos/talchaos/harness/real/qemu"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
)

// Machine is what a provider can do to one node's VM.
type Machine interface {
	PowerOff(ctx context.Context) error
	PowerOn(ctx context.Context) error
	Reset(ctx context.Context) error
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	SetLink(ctx context.Context, up bool) error
	Close() error
}

// power holds the providers' handles to the inventory's VMs.
type power struct {
	machines map[string]Machine
	secrets  []string // provider credentials, kept out of every output
}

// newPower connects to the provider of every node that has one.
func newPower(ctx context.Context, inv *Inventory) (*power, error) {
	p := &power{machines: map[string]Machine{}}

	for _, n := range inv.Nodes {
		var (
			m   Machine
			err error
		)

		switch {
		case n.Proxmox != nil:
			secret, serr := inv.proxmoxSecret()
			if serr != nil {
				p.close() //nolint:errcheck

				return nil, serr
			}

			p.secrets = append(p.secrets, secret)

			m, err = proxmox.Open(ctx, proxmox.Config{
				URL: inv.Proxmox.URL, TokenID: inv.Proxmox.TokenID, TokenSecret: secret,
				InsecureSkipVerify: inv.Proxmox.InsecureSkipVerify,
			}, proxmox.VM{Node: n.Proxmox.Node, VMID: n.Proxmox.VMID, NIC: n.Proxmox.NIC})
		case n.QEMU != nil:
			m, err = qemu.Open(ctx, inv.path(n.QEMU.QMP), n.QEMU.NIC)
		default:
			continue
		}

		if err != nil {
			p.close() //nolint:errcheck

			return nil, fmt.Errorf("node %s provider: %w", n.Name, err)
		}

		p.machines[n.Name] = m
	}

	return p, nil
}

func (p *power) close() error {
	var errs []error

	for _, m := range p.machines {
		errs = append(errs, m.Close())
	}

	return errors.Join(errs...)
}

// proxmoxSecret reads the API token secret from its file or environment variable.
func (inv *Inventory) proxmoxSecret() (string, error) {
	if f := inv.Proxmox.TokenSecretFile; f != "" {
		b, err := readFile(inv.path(f), maxSecretBytes)
		if err != nil {
			return "", fmt.Errorf("proxmox token secret file: %w", err)
		}

		return strings.TrimSpace(string(b)), nil
	}

	v, ok := os.LookupEnv(inv.Proxmox.TokenSecretEnv)
	if !ok || v == "" {
		return "", fmt.Errorf("proxmox token secret: environment variable %s is not set", inv.Proxmox.TokenSecretEnv)
	}

	return v, nil
}

// Process implements target.Processes with the node's provider and its Talos API.
func (c *Cluster) Process(ctx context.Context, node string, op target.ProcessOp) (target.Heal, error) {
	m := c.power.machines[node]
	noop := func() error { return nil }

	switch op {
	case target.RebootNode:
		if m != nil {
			return noop, m.Reset(ctx)
		}

		return noop, c.talos(ctx, node, func(ctx context.Context, cl *client.Client) error { return cl.Reboot(ctx) })
	case target.PowerOff:
		if m == nil {
			return nil, fmt.Errorf("node %s has no power provider", node)
		}

		if err := m.PowerOff(ctx); err != nil {
			return nil, err
		}

		return func() error { return m.PowerOn(context.WithoutCancel(ctx)) }, nil
	case target.WipeEtcd:
		return noop, c.reset(ctx, node, false, []*machine.ResetPartitionSpec{{Label: "EPHEMERAL", Wipe: true}})
	case target.ResetGraceful, target.ResetForced:
		return noop, c.reset(ctx, node, op == target.ResetGraceful, nil)
	}

	return nil, fmt.Errorf("%s cannot be injected on real nodes", op)
}

// Partition implements target.Partitioner: not possible between two real nodes
// without a hand on their network; CheckFault refuses it before the run.
func (c *Cluster) Partition(context.Context, []string, []string) (target.Heal, error) {
	return nil, errors.New("partitions between real nodes are not supported")
}

// Isolate implements target.Partitioner by taking the node's NIC link down.
func (c *Cluster) Isolate(ctx context.Context, node string) (target.Heal, error) {
	m := c.power.machines[node]
	if m == nil {
		return nil, fmt.Errorf("node %s has no NIC provider", node)
	}

	if err := m.SetLink(ctx, false); err != nil {
		return nil, err
	}

	return func() error { return m.SetLink(context.WithoutCancel(ctx), true) }, nil
}

// talos runs one call on the node through its Talos API, directly.
func (c *Cluster) talos(ctx context.Context, node string, call func(context.Context, *client.Client) error) error {
	for _, n := range c.nodes {
		if n.Name != node {
			continue
		}

		direct := n
		direct.Endpoint = n.DirectEndpoint

		cl, err := talosclient.WithConfig(ctx, c.talosconfig, direct.Endpoint, talosclient.ForNode(direct, nil)...)
		if err != nil {
			return err
		}
		defer cl.Close() //nolint:errcheck

		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()

		return call(callCtx, cl)
	}

	return fmt.Errorf("unknown node %q", node)
}

func (c *Cluster) reset(ctx context.Context, node string, graceful bool, parts []*machine.ResetPartitionSpec) error {
	return c.talos(ctx, node, func(ctx context.Context, cl *client.Client) error {
		_, err := cl.ResetGenericWithResponse(ctx, &machine.ResetRequest{Graceful: graceful, Reboot: true, SystemPartitionsToWipe: parts})

		return err
	})
}
