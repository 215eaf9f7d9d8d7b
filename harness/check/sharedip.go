package check

import (
	"context"
	"net"
	"strconv"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	configres "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/sharedip"
	"github.com/talchaos/talchaos/harness/talosclient"
)

// sharedIPOfBoot is the shared IP a node's active config gave it in one boot
// ("" for none); read false until the config was read.
type sharedIPOfBoot struct {
	bootID string
	read   bool
	ip     string
	// never: the node refuses to show its config for good.
	never bool
}

// sharedIP fills in a configured control plane's look the shared IP (VIP)
// its config gives it, and whether the node holds it: an AddressStatus of
// that address, as `talosctl get addresses` lists the address the VIP
// operator's AddressSpec puts on the link (controllers/network/operator/
// vip.go, v1.12.6). The config is read once per boot (the observer's looks
// cost a config's transfer each otherwise); a node without a boot ID is read
// at every look. A node whose config gives none is asked nothing more.
func (c *nodeClients) sharedIP(ctx context.Context, no *history.NodeObservation) {
	c.vipMu.Lock()
	known := c.vip
	c.vipMu.Unlock()

	if known.never {
		return
	}

	if !known.read || no.BootID == "" || known.bootID != no.BootID {
		mc, err := safe.StateGetByID[*configres.MachineConfig](ctx, c.secure.COSI, configres.ActiveID)

		switch code := status.Code(err); {
		case code == codes.PermissionDenied:
			// A sensitive resource, os:admin's only: a talosconfig with a
			// lesser role is refused every time and sees no shared IP.
			c.vipMu.Lock()
			c.vip = sharedIPOfBoot{read: true, never: true}
			c.vipMu.Unlock()

			return
		case err != nil:
			return // asked again at the next look
		}

		known = sharedIPOfBoot{bootID: no.BootID, read: true}
		if ip, _, ok := sharedip.Of(mc.Config()); ok {
			known.ip = ip.String()
		}

		c.vipMu.Lock()
		c.vip = known
		c.vipMu.Unlock()
	}

	if known.ip == "" {
		return
	}

	no.SharedIP = known.ip

	addrs, err := safe.StateListAll[*network.AddressStatus](ctx, c.secure.COSI)
	if err != nil {
		return
	}

	for a := range addrs.All() {
		if a.TypedSpec().Address.Addr().String() == known.ip {
			no.HoldsSharedIP = true

			return
		}
	}
}

// askThroughSharedIP asks the Talos API at the shared IP a node holds for
// its version, with the talosconfig, as a client whose only endpoint is the
// VIP does: whether the address reaches the node (on a real network, its
// neighbours must have learnt the holder's hardware address). The answer
// goes in the holder's look: SharedIPError empty when it answered.
func (o *Observer) askThroughSharedIP(ctx context.Context, no *history.NodeObservation) {
	if !no.HoldsSharedIP {
		return
	}

	o.vipMu.Lock()
	cl, ok := o.vipClients[no.SharedIP]
	o.vipMu.Unlock()

	if !ok {
		var err error
		if cl, err = talosclient.WithConfig(ctx, o.cfg, net.JoinHostPort(no.SharedIP, strconv.Itoa(constants.ApidPort))); err != nil {
			no.SharedIPError = err.Error()

			return
		}

		o.vipMu.Lock()
		if prev, ok := o.vipClients[no.SharedIP]; ok {
			cl.Close() //nolint:errcheck
			cl = prev
		} else {
			o.vipClients[no.SharedIP] = cl
		}
		o.vipMu.Unlock()
	}

	if _, err := cl.Version(ctx); err != nil {
		no.SharedIPError = err.Error()
	}
}
