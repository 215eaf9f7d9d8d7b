package sim_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/api/storage"
	"github.com/siderolabs/talos/pkg/machinery/client"
	machinetype "github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	timeres "github.com/siderolabs/talos/pkg/machinery/resources/time"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/sim/simtest"
)

// wantStatus fails unless err is the gRPC status code with exactly text
// (clients may put their own words before it).
func wantStatus(t *testing.T, what string, err error, code codes.Code, text string) {
	t.Helper()

	if err == nil || !strings.HasSuffix(err.Error(), fmt.Sprintf("rpc error: code = %s desc = %s", code, text)) {
		t.Errorf("%s: got %v, want %s %q", what, err, code, text)
	}
}

// The simulated machine's disk, as `talosctl get disks` shows it: the sim's
// choice of a QEMU virtio-scsi disk (docs/fidelity.md).
var wantDisk = block.DiskSpec{
	DevPath: "/dev/sda", Size: 32 << 30, PrettySize: "34 GB", IOSize: 512, SectorSize: 512,
	Model: "QEMU HARDDISK", Modalias: "scsi:t-0x00", BusPath: "/pci0000:00/0000:00:07.0/virtio4/host0/target0:0:0/0:0:0:0",
	SubSystem: "/sys/class/block", Transport: "virtio", Rotational: true,
}

// A node in maintenance answers the read-only calls of the field's runbooks
// (`talosctl get disks --insecure`, FR-003's preflight) as Talos v1.12.6's
// maintenance service does: its resources through the access policy with
// the reader role (internal/app/resources/access.go,
// controllers/runtime/maintenance_service.go), nothing a config makes, and
// no Dmesg or TimeService.
func TestReadOnlySurfaceInMaintenance(t *testing.T) {
	ctx, cancel := runningContext(time.Minute)
	defer cancel()

	c := simtest.FromScenario(t, newScenario(1), 1)
	n := c.Nodes()[0]
	ic := insecureClient(t, ctx, n)

	eventually(t, 30*time.Second, func() error { _, err := ic.Disks(ctx); return err })

	disks, err := safe.StateListAll[*block.Disk](ctx, ic.COSI)
	if err != nil {
		t.Fatal(err)
	}

	if disks.Len() != 1 || disks.Get(0).Metadata().ID() != "sda" || disks.Get(0).Metadata().Namespace() != "runtime" ||
		!reflect.DeepEqual(*disks.Get(0).TypedSpec(), wantDisk) {
		t.Errorf("disks: %v", resourceDump(disks.All()))
	}

	resp, err := ic.Disks(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if d := resp.Messages[0].Disks; len(d) != 1 || d[0].DeviceName != "/dev/sda" || d[0].SystemDisk || d[0].Type != storage.Disk_HDD ||
		d[0].Model != "QEMU HARDDISK" || d[0].Size != 32<<30 || d[0].Subsystem != "/sys/class/block" {
		t.Errorf("Disks RPC in maintenance: %v", d)
	}

	hostname, err := safe.StateGetByID[*network.HostnameStatus](ctx, ic.COSI, network.HostnameID)
	if err != nil || hostname.TypedSpec().Hostname != "cp1" {
		t.Errorf("hostname: %v %v", hostname, err)
	}

	mt, err := safe.StateGetByID[*config.MachineType](ctx, ic.COSI, config.MachineTypeID)
	if err != nil || mt.MachineType() != machinetype.TypeUnknown {
		t.Errorf("machine type in maintenance: %v %v", mt, err)
	}

	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
		text string
	}{
		{"get systemdisk (not installed)", func() error {
			_, err := safe.StateGetByID[*block.SystemDisk](ctx, ic.COSI, block.SystemDiskID)
			return err
		}, codes.NotFound, "resource SystemDisks.block.talos.dev(runtime/system-disk@undefined) doesn't exist"},
		{"get member", func() error {
			_, err := safe.StateGetByID[*cluster.Member](ctx, ic.COSI, "cp1")
			return err
		}, codes.NotFound, "resource Members.cluster.talos.dev(cluster/cp1@undefined) doesn't exist"},
		{"get nodename", func() error {
			_, err := safe.StateGetByID[*k8s.Nodename](ctx, ic.COSI, k8s.NodenameID)
			return err
		}, codes.NotFound, "resource Nodenames.kubernetes.talos.dev(k8s/nodename@undefined) doesn't exist"},
		{"list machineconfigs (sensitive, reader)", func() error {
			_, err := safe.StateListAll[*config.MachineConfig](ctx, ic.COSI)
			return err
		}, codes.PermissionDenied, "not authorized"},
		{"get a type without definition", func() error {
			_, err := ic.COSI.Get(ctx, resource.NewMetadata("runtime", "Foos.example.com", "x", resource.VersionUndefined))
			return err
		}, codes.PermissionDenied, `resource type "Foos.example.com" is not supported`},
		{"create", func() error {
			return ic.COSI.Create(ctx, cluster.NewMember(cluster.NamespaceName, "intruder"))
		}, codes.PermissionDenied, "write access is not allowed"},
		{"resolve \"time\"", func() error {
			ns := resource.Namespace("")
			_, err := ic.ResolveResourceKind(ctx, &ns, "time")
			return err
		}, codes.NotFound, `resource "time" is not registered`},
		{"dmesg", func() error {
			s, err := ic.Dmesg(ctx, false, false)
			if err != nil {
				return err
			}

			_, err = s.Recv()
			return err
		}, codes.Unimplemented, "method Dmesg not implemented"},
		{"time", func() error {
			_, err := ic.Time(ctx)
			return err
		}, codes.Unimplemented, "unknown service time.TimeService"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantStatus(t, tc.name, tc.call(), tc.code, tc.text) })
	}

	for _, alias := range []struct{ alias, typ, ns string }{
		{"disks", block.DiskType, "runtime"},
		{"members", cluster.MemberType, "cluster"},
		{"hostname", network.HostnameStatusType, "network"},
		{"addresses", network.AddressStatusType, "network"},
		{"nodename", k8s.NodenameType, "k8s"},
		{"staticpods", k8s.StaticPodType, "k8s"},
		{"machineconfig", config.MachineConfigType, "config"},
		{"timestatus", timeres.StatusType, "runtime"},
	} {
		ns := resource.Namespace("")

		rd, err := ic.ResolveResourceKind(ctx, &ns, alias.alias)
		if err != nil || rd.Metadata().ID() != strings.ToLower(alias.typ) || ns != alias.ns {
			t.Errorf("resolve %q: %v in %q, %v; want %s in %q", alias.alias, rd, ns, err, alias.typ, alias.ns)
		}
	}
}

// A formed cluster answers what `talosctl health` (with no node list: its
// nodes from the members) and the field's runbooks read, in Talos v1.12.6's
// shapes: Members and Affiliates from discovery (a node whose config turns
// discovery off lists none and is listed by none), the node's Nodename,
// MachineConfigs, SystemDisk, addresses and time, `talosctl time`, and
// `talosctl dmesg` (-f, --tail) carrying machined's log as kernel records.
func TestReadOnlySurfaceConfigured(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	sc := newScenario(2)
	sc.Cluster.Workers = 1
	sc.Cluster.ConfigPatches = []scenario.ConfigPatch{
		{Nodes: []string{"cp2"}, Patch: "apiVersion: v1alpha1\nkind: HostnameConfig\nauto: off\nhostname: solcp02\n"},
		{Nodes: []string{"w1"}, Patch: "cluster:\n  discovery:\n    enabled: false\n"},
	}

	c := simtest.FromScenario(t, sc, 1)
	nodes := c.Nodes()
	cp1, cp2, w1 := nodes[0], nodes[1], nodes[2]

	cl := applyAndBootstrap(t, ctx, c, cp1.Endpoint)
	waitVoters(t, ctx, cl, 2)

	on := func(ip string) context.Context { return client.WithNode(ctx, ip) }

	type member struct {
		id, hostname string
		typ          machinetype.Type
		addr         string
		port         int
	}

	members := func(ip string) ([]member, error) {
		list, err := safe.StateListAll[*cluster.Member](on(ip), cl.COSI)
		if err != nil {
			return nil, err
		}

		var out []member

		for m := range list.All() {
			s := m.TypedSpec()
			port := 0

			if s.ControlPlane != nil {
				port = s.ControlPlane.APIServerPort
			}

			if s.OperatingSystem != "Talos (v1.12.6)" || !regexp.MustCompile(`^[0-9a-zA-Z]{40,44}$`).MatchString(s.NodeID) || len(s.Addresses) != 1 {
				return nil, fmt.Errorf("member %s: %+v", m.Metadata().ID(), s)
			}

			out = append(out, member{m.Metadata().ID(), s.Hostname, s.MachineType, s.Addresses[0].String(), port})
		}

		return out, nil
	}

	want := []member{
		{"cp1", "cp1", machinetype.TypeControlPlane, cp1.Address, 6443},
		{"solcp02", "solcp02", machinetype.TypeControlPlane, cp2.Address, 6443},
	}

	for _, tc := range []struct {
		node string
		ip   string
		want []member
	}{
		{"cp1", cp1.Address, want},
		{"cp2", cp2.Address, want},
		{"w1 (discovery off)", w1.Address, nil},
	} {
		eventually(t, 10*time.Second, func() error {
			got, err := members(tc.ip)
			if err != nil {
				return err
			}

			if !slices.Equal(got, tc.want) {
				return fmt.Errorf("members on %s: %+v, want %+v", tc.node, got, tc.want)
			}

			return nil
		})
	}

	affiliates, err := safe.StateListAll[*cluster.Affiliate](on(cp1.Address), cl.COSI)
	if err != nil || affiliates.Len() != 2 {
		t.Errorf("affiliates on cp1: %v %v", affiliates.Len(), err)
	}

	identity, err := safe.StateGetByID[*cluster.Identity](on(cp1.Address), cl.COSI, cluster.LocalIdentity)
	if err != nil {
		t.Fatal(err)
	}

	if _, ok := affiliates.Find(func(a *cluster.Affiliate) bool {
		return a.Metadata().ID() == identity.TypedSpec().NodeID && a.TypedSpec().Nodename == "cp1"
	}); !ok {
		t.Errorf("cp1's identity %s is not its affiliate's: %s", identity.TypedSpec().NodeID, resourceDump(affiliates.All()))
	}

	wantStatus(t, "get member w1", func() error {
		_, err := safe.StateGetByID[*cluster.Member](on(cp1.Address), cl.COSI, "w1")
		return err
	}(), codes.NotFound, "resource Members.cluster.talos.dev(cluster/w1@undefined) doesn't exist")

	nn, err := safe.StateGetByID[*k8s.Nodename](on(cp2.Address), cl.COSI, k8s.NodenameID)
	if err != nil || nn.TypedSpec().Nodename != "solcp02" || nn.TypedSpec().HostnameVersion == "" {
		t.Errorf("cp2's nodename: %v %v", nn, err)
	}

	for _, tc := range []struct {
		ip  string
		typ machinetype.Type
	}{{cp1.Address, machinetype.TypeControlPlane}, {w1.Address, machinetype.TypeWorker}} {
		mt, err := safe.StateGetByID[*config.MachineType](on(tc.ip), cl.COSI, config.MachineTypeID)
		if err != nil || mt.MachineType() != tc.typ {
			t.Errorf("machine type of %s: %v %v", tc.ip, mt, err)
		}
	}

	// Both applied in maintenance: the active config and the one persisted.
	cfgs, err := safe.StateListAll[*config.MachineConfig](on(cp1.Address), cl.COSI)
	if err != nil {
		t.Fatal(err)
	}

	var ids []string
	for r := range cfgs.All() {
		ids = append(ids, r.Metadata().ID())

		if r.Provider().Machine().Type() != machinetype.TypeControlPlane {
			t.Errorf("machine config %s: %v", r.Metadata().ID(), r.Provider().Machine().Type())
		}
	}

	if !slices.Equal(ids, []string{"persistent", "v1alpha1"}) {
		t.Errorf("machine configs: %v", ids)
	}

	sd, err := safe.StateGetByID[*block.SystemDisk](on(cp1.Address), cl.COSI, block.SystemDiskID)
	if err != nil || sd.TypedSpec().DiskID != "sda" || sd.TypedSpec().DevPath != "/dev/sda" {
		t.Errorf("system disk: %v %v", sd, err)
	}

	disks, err := cl.Disks(on(cp1.Address))
	if err != nil || len(disks.Messages[0].Disks) != 1 || !disks.Messages[0].Disks[0].SystemDisk {
		t.Errorf("Disks RPC, installed: %v %v", disks, err)
	}

	ts, err := safe.StateGetByID[*timeres.Status](on(cp1.Address), cl.COSI, timeres.StatusID)
	if err != nil || !ts.TypedSpec().Synced || ts.TypedSpec().SyncDisabled {
		t.Errorf("time status: %v %v", ts, err)
	}

	prefix := netip.MustParsePrefix(cp1.Address + "/24")

	routed, err := safe.StateGetByID[*network.NodeAddress](on(cp1.Address), cl.COSI, network.NodeAddressRoutedID)
	if err != nil || !slices.Equal(routed.TypedSpec().Addresses, []netip.Prefix{prefix}) {
		t.Errorf("routed node addresses: %v %v", routed, err)
	}

	noK8s, err := safe.StateGetByID[*network.NodeAddress](on(cp1.Address), cl.COSI, network.FilteredNodeAddressID(network.NodeAddressRoutedID, k8s.NodeAddressFilterNoK8s))
	if err != nil || !slices.Equal(noK8s.TypedSpec().Addresses, []netip.Prefix{prefix}) {
		t.Errorf("routed-no-k8s node addresses: %v %v", noK8s, err)
	}

	eth0, err := safe.StateGetByID[*network.AddressStatus](on(cp1.Address), cl.COSI, network.AddressID("eth0", prefix))
	if err != nil || eth0.TypedSpec().LinkName != "eth0" || eth0.TypedSpec().Broadcast.String() != strings.TrimSuffix(prefix.Masked().Addr().String(), ".0")+".255" {
		t.Errorf("eth0's address: %v %v", eth0, err)
	}

	tr, err := cl.Time(on(cp1.Address))
	if err != nil || tr.Messages[0].Server != "time.cloudflare.com" || time.Since(tr.Messages[0].Remotetime.AsTime()).Abs() > time.Minute {
		t.Errorf("time: %v %v", tr, err)
	}

	testDmesg(t, ctx, cl, cp1.Address)
}

var kernelRecord = regexp.MustCompile(`^user: warning: \[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z\]: .*\n$`)

// testDmesg reads a configured node's kernel log: all of it, only what
// comes after (--tail -f), and nothing (--tail without -f).
func testDmesg(t *testing.T, ctx context.Context, cl *client.Client, ip string) {
	t.Helper()

	ctx = client.WithNode(ctx, ip)

	records := func(ctx context.Context, follow, tail bool, until string) ([]string, error) {
		s, err := cl.Dmesg(ctx, follow, tail)
		if err != nil {
			return nil, err
		}

		var out []string

		for {
			data, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return out, nil
			}

			if err != nil {
				return out, err
			}

			out = append(out, string(data.Bytes))

			if until != "" && strings.Contains(string(data.Bytes), until) {
				return out, nil
			}
		}
	}

	all, err := records(ctx, false, false, "")
	if err != nil || len(all) == 0 {
		t.Fatalf("dmesg: %d records, %v", len(all), err)
	}

	for _, r := range all {
		if !kernelRecord.MatchString(r) {
			t.Errorf("dmesg record %q", r)
		}
	}

	if !slices.ContainsFunc(all, func(r string) bool {
		return strings.Contains(r, "]: [talos] applied configuration, leaving maintenance mode\n")
	}) {
		t.Errorf("dmesg has no [talos] line of leaving maintenance: %q", all)
	}

	none, err := records(ctx, false, true, "")
	if err != nil || len(none) != 0 {
		t.Errorf("dmesg --tail without -f: %q %v", none, err)
	}

	// -f --tail: only what machined logs from now on (a second bootstrap is
	// logged, then refused).
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	defer fcancel()

	got := make(chan []string, 1)

	go func() {
		r, err := records(fctx, true, true, "bootstrap request received")
		if err != nil {
			t.Errorf("dmesg -f --tail: %v", err)
		}

		got <- r
	}()

	eventually(t, 10*time.Second, func() error {
		err := cl.Bootstrap(ctx, &machine.BootstrapRequest{})
		if status.Code(err) != codes.AlreadyExists {
			return fmt.Errorf("second bootstrap: %w", err)
		}

		select {
		case r := <-got:
			got <- r

			return nil
		case <-time.After(500 * time.Millisecond):
			return errors.New("no record yet")
		}
	})

	r := <-got
	if len(r) == 0 || !strings.HasSuffix(r[len(r)-1], "]: [talos] bootstrap request received\n") || slices.Contains(r, all[0]) {
		t.Errorf("dmesg -f --tail: %q", r)
	}
}

func resourceDump[T resource.Resource](all func(func(T) bool)) string {
	var b strings.Builder

	for r := range all {
		fmt.Fprintf(&b, "%s %+v; ", r.Metadata(), r.Spec())
	}

	return b.String()
}
