package sim

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/typed"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	configres "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
)

// controllerTick is how often a node's controllers derive its resources
// again without being woken (a config change anywhere in an in-process
// cluster wakes them at once): how soon a node process sees a peer in the
// discovery registry.
const controllerTick = time.Second

// runControllers keeps the node's resources what machined's controllers
// make of the machine, its config and the cluster's discovery, for the
// boot: at once, then whenever woken or every controllerTick.
func (n *Node) runControllers(ctx context.Context) {
	var last string

	for {
		if err := n.syncResources(ctx); err != nil && ctx.Err() == nil && err.Error() != last {
			last = err.Error()
			n.machined.Printf("controller: %s", err)
		}

		select {
		case <-ctx.Done():
			return
		case <-n.resync:
		case <-time.After(controllerTick):
		}
	}
}

// wake has the node's controllers run again now.
func (n *Node) wake() {
	select {
	case n.resync <- struct{}{}:
	default:
	}
}

// wakeAll wakes the controllers of every node of the cluster (one, for a
// node process).
func (c *Cluster) wakeAll() {
	for _, n := range c.nodes {
		n.wake()
	}
}

// syncResources writes the resources the sim models (docs/fidelity.md,
// "Resources"); those of a config are removed when the node has none.
func (n *Node) syncResources(ctx context.Context) error {
	n.mu.Lock()
	cfg, persisted := n.cfg, n.persistedNow
	n.mu.Unlock()

	return errors.Join(
		n.syncBlock(ctx, cfg),
		n.syncNetwork(ctx, cfg),
		n.syncTime(ctx, cfg),
		n.syncEtcdCerts(ctx),
		n.syncConfig(ctx, cfg, persisted),
		n.syncDiscovery(ctx, cfg),
	)
}

// The simulated machine's one disk: a virtio-scsi disk of a QEMU VM, as on
// the Proxmox labs of the field reports. Model, bus path and size are the
// sim's choice; a QEMU disk has no serial or WWID unless the VM sets one.
const (
	diskID   = "sda"
	diskSize = 32 << 30
)

// syncBlock is block.DisksController's Disk (internal/app/machined/pkg/
// controllers/block/disks.go, from udev), in maintenance too, and
// SystemDiskController's SystemDisk once the node is installed: the sim's
// nodes are installed to /dev/sda (machine.install.disk) with their config.
func (n *Node) syncBlock(ctx context.Context, cfg config.Provider) error {
	disk := block.NewDisk(block.NamespaceName, diskID)
	spec := disk.TypedSpec()
	spec.DevPath = "/dev/" + diskID
	spec.SetSize(diskSize)
	spec.IOSize, spec.SectorSize = 512, 512
	spec.Model = "QEMU HARDDISK"
	spec.Modalias = "scsi:t-0x00"
	spec.BusPath = "/pci0000:00/0000:00:07.0/virtio4/host0/target0:0:0/0:0:0:0"
	spec.SubSystem = "/sys/class/block"
	spec.Transport = "virtio"
	spec.Rotational = true

	var system []*block.SystemDisk

	if cfg != nil {
		sd := block.NewSystemDisk(block.NamespaceName, block.SystemDiskID)
		sd.TypedSpec().DiskID, sd.TypedSpec().DevPath = diskID, "/dev/"+diskID
		system = append(system, sd)
	}

	return errors.Join(
		syncAll(ctx, n.resources, block.NamespaceName, "block.DisksController", []*block.Disk{disk}),
		syncAll(ctx, n.resources, block.NamespaceName, "block.SystemDiskController", system),
	)
}

// syncNetwork writes HostnameStatus (HostnameStatusController: the config's
// hostname, else the node's name where Talos makes talos-xxx-yyy),
// AddressStatus (AddressStatusController: lo's addresses and the node's on
// eth0) and NodeAddress (NodeAddressController: default, current, routed,
// accumulative; with a config also filtered through the no-k8s and only-k8s
// filters NodeAddressFilterController makes of the pod and service CIDRs).
// The node's address is treated as a NIC's, though the sim puts it on lo.
func (n *Node) syncNetwork(ctx context.Context, cfg config.Provider) error {
	hostname := network.NewHostnameStatus(network.NamespaceName, network.HostnameID)
	hostname.TypedSpec().Hostname = n.Hostname()

	lo4 := netip.MustParsePrefix("127.0.0.1/8")
	lo6 := netip.MustParsePrefix("::1/128")
	addrs := []*network.AddressStatus{
		addressStatus("lo", 1, lo4, nethelpers.ScopeHost),
		addressStatus("lo", 1, lo6, nethelpers.ScopeHost),
	}

	// The node's address in each subnet on a NIC of its own (eth0, eth1,
	// ...: the sim's one block is a /24); a further host address
	// (cluster.nodes.*.addresses, /32 or /128) on lo, as an announced
	// loopback address is.
	nic := uint32(0)

	for _, a := range n.addrs {
		down := n.isDown(a.Addr) // not up yet (lateaddr.go): no AddressStatus

		if a.Bits == a.Addr.BitLen() {
			if !down {
				addrs = append(addrs, addressStatus("lo", 1, a.Prefix(), nethelpers.ScopeGlobal))
			}

			continue
		}

		if !down {
			addrs = append(addrs, addressStatus(fmt.Sprintf("eth%d", nic), 2+nic, a.Prefix(), nethelpers.ScopeGlobal))
		}

		nic++
	}

	// The shared IP on the first NIC while the node holds it (VIP.AddressSpecs).
	if ip, held := n.vipHeld(); held {
		addrs = append(addrs, addressStatus("eth0", 2, netip.PrefixFrom(ip, ip.BitLen()), nethelpers.ScopeGlobal))
	}

	algorithm := nethelpers.AddressSortAlgorithmV1
	if cfg != nil && cfg.Machine() != nil {
		algorithm = cfg.Machine().Features().NodeAddressSortAlgorithm()
	}

	nodeAddress := func(id resource.ID, prefixes []netip.Prefix) *network.NodeAddress {
		r := network.NewNodeAddress(network.NamespaceName, id)
		r.TypedSpec().Addresses = prefixes
		r.TypedSpec().SortAlgorithm = algorithm

		return r
	}

	mine := n.nodePrefixes(cfg)
	// The default: the first address of the alphabetically first link
	// (eth0 before lo).
	nodeAddrs := []*network.NodeAddress{
		nodeAddress(network.NodeAddressDefaultID, []netip.Prefix{n.addrs[0].Prefix()}),
		nodeAddress(network.NodeAddressCurrentID, mine),
		nodeAddress(network.NodeAddressRoutedID, mine),
		nodeAddress(network.NodeAddressAccumulativeID, mine),
	}

	if cfg != nil && cfg.Cluster() != nil {
		filtered := map[string][]netip.Prefix{k8s.NodeAddressFilterNoK8s: nil, k8s.NodeAddressFilterOnlyK8s: nil}

		for _, p := range mine {
			inK8s := false

			for _, cidr := range append(cfg.Cluster().Network().PodCIDRs(), cfg.Cluster().Network().ServiceCIDRs()...) {
				if c, err := netip.ParsePrefix(cidr); err == nil && c.Contains(p.Addr()) {
					inK8s = true
				}
			}

			if inK8s {
				filtered[k8s.NodeAddressFilterOnlyK8s] = append(filtered[k8s.NodeAddressFilterOnlyK8s], p)
			} else {
				filtered[k8s.NodeAddressFilterNoK8s] = append(filtered[k8s.NodeAddressFilterNoK8s], p)
			}
		}

		for filter, prefixes := range filtered {
			for _, kind := range []resource.ID{network.NodeAddressCurrentID, network.NodeAddressRoutedID, network.NodeAddressAccumulativeID} {
				nodeAddrs = append(nodeAddrs, nodeAddress(network.FilteredNodeAddressID(kind, filter), prefixes))
			}
		}
	}

	return errors.Join(
		syncAll(ctx, n.resources, network.NamespaceName, "network.HostnameSpecController", []*network.HostnameStatus{hostname}),
		syncAll(ctx, n.resources, network.NamespaceName, "network.AddressStatusController", addrs),
		syncAll(ctx, n.resources, network.NamespaceName, "network.NodeAddressController", nodeAddrs),
	)
}

func addressStatus(link string, index uint32, p netip.Prefix, scope nethelpers.Scope) *network.AddressStatus {
	r := network.NewAddressStatus(network.NamespaceName, network.AddressID(link, p))
	s := r.TypedSpec()
	s.Address, s.Local, s.LinkName, s.LinkIndex, s.Scope = p, p.Addr(), link, index, scope
	s.Flags = nethelpers.AddressFlags(nethelpers.AddressPermanent)
	s.Family = nethelpers.FamilyInet4

	if p.Addr().Is6() {
		s.Family, s.Local = nethelpers.FamilyInet6, netip.Addr{}
	} else if p.Bits() < 31 {
		s.Broadcast = broadcast(p)
	}

	return r
}

// broadcast is the last address of an IPv4 prefix.
func broadcast(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1

	for i := range 4 {
		a[i] |= byte(host >> (8 * (3 - i)))
	}

	return netip.AddrFrom4(a)
}

// syncConfig writes the MachineConfigs (the active one as v1alpha1; the one
// last persisted in this boot, by the maintenance service or an apply, as
// persistent: Runtime.SetConfig and SetPersistedConfig,
// runtime/v1alpha1/v1alpha1_runtime.go), MachineType (MachineTypeController:
// unknown without a config) and, with a config, Nodename
// (k8s.NodenameController) and the node's cluster Identity.
func (n *Node) syncConfig(ctx context.Context, cfg, persisted config.Provider) error {
	var errs []error

	for id, c := range map[resource.ID]config.Provider{configres.ActiveID: cfg, configres.PersistentID: persisted} {
		md := configres.NewMachineConfigWithID(nil, id).Metadata()

		if c == nil {
			errs = append(errs, destroy(ctx, n.resources, md))

			continue
		}

		errs = append(errs, putMachineConfig(ctx, n.resources, configres.NewMachineConfigWithID(c, id)))
	}

	typ := machine.TypeUnknown
	if cfg != nil && cfg.Machine() != nil {
		typ = cfg.Machine().Type()
	}

	errs = append(errs, safe.StateModify(ctx, n.resources, configres.NewMachineType(), func(r *configres.MachineType) error {
		r.SetMachineType(typ)

		return nil
	}, state.WithUpdateOwner("config.MachineTypeController")))

	var (
		nodenames  []*k8s.Nodename
		identities []*cluster.Identity
	)

	if cfg != nil && cfg.Machine() != nil {
		hostname, _ := safe.StateGetByID[*network.HostnameStatus](ctx, n.resources, network.HostnameID) //nolint:errcheck // written just before

		nn := k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID)
		nn.TypedSpec().Nodename = nodename(n.Hostname())
		nn.TypedSpec().SkipNodeRegistration = cfg.Machine().Kubelet().SkipNodeRegistration()

		if hostname != nil {
			nn.TypedSpec().HostnameVersion = hostname.Metadata().Version().String()
		}

		id := cluster.NewIdentity(cluster.NamespaceName, cluster.LocalIdentity)
		id.TypedSpec().NodeID = n.nodeID()
		nodenames, identities = append(nodenames, nn), append(identities, id)
	}

	errs = append(errs,
		syncAll(ctx, n.resources, k8s.NamespaceName, "k8s.NodenameController", nodenames),
		syncAll(ctx, n.resources, cluster.NamespaceName, "cluster.NodeIdentityController", identities))

	return errors.Join(errs...)
}

// putMachineConfig creates or replaces a MachineConfig: its spec is the
// config itself (not a typed spec), compared by its bytes.
func putMachineConfig(ctx context.Context, st state.State, want *configres.MachineConfig) error {
	cur, err := safe.StateGet[*configres.MachineConfig](ctx, st, want.Metadata())
	if err != nil {
		if state.IsNotFoundError(err) {
			return st.Create(ctx, want)
		}

		return err
	}

	curBytes, err1 := cur.Provider().Bytes()
	wantBytes, err2 := want.Provider().Bytes()

	if err1 == nil && err2 == nil && string(curBytes) == string(wantBytes) {
		return nil
	}

	want.Metadata().SetVersion(cur.Metadata().Version())

	return st.Update(ctx, want)
}

// nodename is Talos's nodename.FromHostname
// (controllers/k8s/internal/nodename): the hostname made an RFC 1123 name.
func nodename(hostname string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		case r == '-' || r == '_':
			return '-'
		}

		return -1
	}, hostname)

	return strings.Trim(name, "-.")
}

// nodeID stands for the node's cluster identity (NodeIdentityController: 32
// random bytes, base62, kept on STATE): 32 bytes derived from the cluster's
// seed and the node's name, so it is the same across reboots and restarts
// of a node process. Differs: a reset does not make a new one.
func (n *Node) nodeID() string {
	sum := sha256.Sum256(fmt.Appendf(nil, "talchaos node identity %d %s", n.c.seed, n.name))

	return new(big.Int).SetBytes(sum[:]).Text(62)
}

// destroy removes a resource; one already gone is fine.
func destroy(ctx context.Context, st state.State, md *resource.Metadata, opts ...state.DestroyOption) error {
	if err := st.Destroy(ctx, md, opts...); err != nil && !state.IsNotFoundError(err) {
		return err
	}

	return nil
}

// syncAll makes the resources of want's type in namespace ns exactly want,
// owned by the controller Talos writes them with: each created or updated
// (a write only when its spec changed), any other instance destroyed. The
// type comes from the resource definition, so an empty want clears it.
func syncAll[S typed.DeepCopyable[S], E typed.Extension](ctx context.Context, st state.State, ns resource.Namespace, owner string, want []*typed.Resource[S, E]) error {
	keep := map[resource.ID]bool{}

	for _, w := range want {
		keep[w.Metadata().ID()] = true

		if err := safe.StateModify(ctx, st, w.DeepCopy().(*typed.Resource[S, E]), func(cur *typed.Resource[S, E]) error { //nolint:forcetypeassert
			*cur.TypedSpec() = (*w.TypedSpec()).DeepCopy()

			return nil
		}, state.WithUpdateOwner(owner)); err != nil {
			return err
		}
	}

	var ext E

	list, err := st.List(ctx, resource.NewMetadata(ns, ext.ResourceDefinition().Type, "", resource.VersionUndefined))
	if err != nil {
		return err
	}

	for _, r := range list.Items {
		if !keep[r.Metadata().ID()] {
			if err := destroy(ctx, st, r.Metadata(), state.WithDestroyOwner(owner)); err != nil {
				return err
			}
		}
	}

	return nil
}
