package sim_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/simtest"
)

// fr000 is field report FR-000's cluster as its files show it: control
// planes solcp01-03, IPv6 first and dual-stack, announced loopbacks
// (cp3's not routed between the nodes here), etcd advertising the
// loopback and the node subnet.
func fr000(t *testing.T) *scenario.Scenario {
	t.Helper()

	hostname := func(n string) string {
		return "apiVersion: v1alpha1\nkind: HostnameConfig\nauto: off\nhostname: solcp0" + n + "\n"
	}

	sc := newScenario(3)
	sc.Cluster.Network = &scenario.Network{Addresses: []string{"fd00:101::11/64", "10.101.0.11/24"}, Endpoint: "fd00:101::10"}
	sc.Cluster.Nodes = map[string]scenario.NodeOverride{
		"cp1": {Addresses: []scenario.NodeAddress{{Address: "fd00:101:fe::11"}}},
		"cp2": {Addresses: []scenario.NodeAddress{{Address: "fd00:101:fe::12"}}},
		"cp3": {Addresses: []scenario.NodeAddress{{Address: "fd00:101:fe::13", Unrouted: true}}},
	}
	sc.Cluster.ConfigPatches = []scenario.ConfigPatch{
		{Patch: "cluster:\n  etcd:\n    advertisedSubnets: [fd00:101:fe::/64, fd00:101::/64]\n"},
		{Nodes: []string{"cp1"}, Patch: hostname("1")},
		{Nodes: []string{"cp2"}, Patch: hostname("2")},
		{Nodes: []string{"cp3"}, Patch: hostname("3")},
	}

	return sc
}

// FR-000's cluster forms as written: three voters named by their configs'
// hostnames, each advertising its node address and its loopback in
// brackets; the Talos API answers on every routed address of a node, with a
// certificate naming them all, and routes -n by any of them; an unrouted
// address has no route from the others.
func TestOperatorsAddressesFormTheCluster(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	c := simtest.FromScenario(t, fr000(t), 1)
	nodes := c.Nodes()

	if nodes[0].Endpoint != "[fd00:101::11]:50000" || nodes[0].Hostname != "solcp01" || !slices.Equal(nodes[0].Addresses, []string{"10.101.0.11", "fd00:101:fe::11"}) {
		t.Fatalf("cp1 is %+v", nodes[0])
	}

	for _, n := range nodes {
		apply(t, ctx, n)
	}

	// cp1 through its IPv4 address: the certificate names it too.
	cl := secureAt(t, ctx, c, "10.101.0.11:50000")

	eventually(t, 30*time.Second, func() error { return cl.Bootstrap(ctx, &machine.BootstrapRequest{}) })

	// In the spec's order, subnet by subnet (FilterIPs): etcd's MemberAdd and
	// initial cluster sort the URLs, and Talos's AdvertisedPeerController
	// updates each member to the spec's order once its etcd is healthy.
	want := []string{
		"solcp01 https://[fd00:101:fe::11]:2380,https://[fd00:101::11]:2380",
		"solcp02 https://[fd00:101:fe::12]:2380,https://[fd00:101::12]:2380",
		"solcp03 https://[fd00:101:fe::13]:2380,https://[fd00:101::13]:2380",
	}

	eventually(t, 90*time.Second, func() error {
		// Asked of cp2 by its loopback address.
		resp, err := cl.EtcdMemberList(client.WithNodes(ctx, "fd00:101:fe::12"), &machine.EtcdMemberListRequest{})
		if err != nil {
			return err
		}

		var got []string

		for _, m := range resp.GetMessages()[0].GetMembers() {
			if m.GetIsLearner() {
				return fmt.Errorf("%s is a learner", m.GetHostname())
			}

			got = append(got, m.GetHostname()+" "+strings.Join(m.GetPeerUrls(), ","))
		}

		slices.Sort(got)

		if !slices.Equal(got, want) {
			return fmt.Errorf("members %q, want %q", got, want)
		}

		return nil
	})

	if _, err := net.DialTimeout("tcp", "[fd00:101:fe::13]:2380", 5*time.Second); err == nil || !strings.Contains(err.Error(), "no route to host") {
		t.Errorf("dialling cp3's unrouted loopback: %v, want no route to host", err)
	}
}

// A shared IP (Layer2VIPConfig on every control plane, at the endpoint
// address) follows etcd: nobody holds it before the bootstrap ("no route
// to host"), one healthy control plane takes it once etcd runs, its Talos
// API answering there and its addresses listing it, and when that holder
// reboots another takes it.
func TestSharedIPFollowsEtcd(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	sc := fr000(t)
	sc.Cluster.ConfigPatches = append(sc.Cluster.ConfigPatches,
		scenario.ConfigPatch{Patch: "apiVersion: v1alpha1\nkind: Layer2VIPConfig\nname: fd00:101::10\nlink: eth0\n"})

	c := simtest.FromScenario(t, sc, 1)
	nodes := c.Nodes()

	if _, err := net.DialTimeout("tcp", "[fd00:101::10]:50000", 5*time.Second); err == nil || !strings.Contains(err.Error(), "no route to host") {
		t.Fatalf("the shared IP before any node holds it: %v, want no route to host", err)
	}

	cl := applyAndBootstrap(t, ctx, c, nodes[0].Endpoint)
	eventually(t, 90*time.Second, func() error { return allVoters(ctx, cl, nodes) })

	// Who answers on the shared IP, by the hostname its Talos API reports.
	holder := func() (string, error) {
		vc, err := talosclient.WithConfig(ctx, c.Talosconfig(), "[fd00:101::10]:50000")
		if err != nil {
			return "", err
		}
		defer vc.Close() //nolint:errcheck

		h, err := safe.StateGetByID[*network.HostnameStatus](ctx, vc.COSI, network.HostnameID)
		if err != nil {
			return "", err
		}

		return h.TypedSpec().Hostname, nil
	}

	var first string

	eventually(t, 90*time.Second, func() error {
		var err error

		first, err = holder()

		return err
	})

	// The holder lists the shared IP among its addresses.
	node := nodes[slices.IndexFunc(nodes, func(n target.Node) bool { return n.Hostname == first })]

	eventually(t, 30*time.Second, func() error {
		a, err := safe.StateGetByID[*network.AddressStatus](client.WithNode(ctx, node.Address), cl.COSI, "eth0/fd00:101::10/128")
		if err != nil {
			return err
		}

		if a.TypedSpec().Address.String() != "fd00:101::10/128" {
			return fmt.Errorf("address %s", a.TypedSpec().Address)
		}

		return nil
	})

	if err := cl.Reboot(client.WithNode(ctx, node.Address)); err != nil {
		t.Fatal(err)
	}

	eventually(t, 90*time.Second, func() error {
		now, err := holder()
		if err != nil {
			return err
		}

		if now == first {
			return fmt.Errorf("%s still holds it", now)
		}

		return nil
	})
}

// allVoters checks the member list holds the nodes, none a learner, and
// every node's etcd is healthy (so each campaigns for a shared IP).
func allVoters(ctx context.Context, cl *client.Client, nodes []target.Node) error {
	resp, err := cl.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	if err != nil {
		return err
	}

	members := resp.GetMessages()[0].GetMembers()
	if len(members) != len(nodes) || slices.ContainsFunc(members, func(m *machine.EtcdMember) bool { return m.GetIsLearner() }) {
		return fmt.Errorf("members %v", members)
	}

	for _, n := range nodes {
		svcs, err := cl.ServiceInfo(client.WithNode(ctx, n.Address), "etcd")
		if err != nil {
			return err
		}

		if len(svcs) == 0 || !svcs[0].Service.GetHealth().GetHealthy() {
			return fmt.Errorf("%s: etcd not healthy yet", n.Name)
		}
	}

	return nil
}

// Two control planes configured with one hostname: the second to join
// removes the first's member (Talos's addMember removes a member with its
// own name before adding itself), and the first's etcd, removed from the
// cluster, exits and is restarted for good (a crash loop).
func TestDuplicateHostnames(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	sc := newScenario(3)
	// v1.14 adopts a learner of its own whose add's reply it lost: cp3's add
	// goes out just after it removed cp2's member, when cp2 may have been
	// the leader and cp1 is still electing itself, and under load it can be
	// applied after the attempt gave up; v1.12 then fails every later add
	// ("Peer URLs already exists") for good, a race of its own that this
	// test is not about (members named solcp02: none, twice in make test).
	sc.Talos = "v1.14"
	same := "apiVersion: v1alpha1\nkind: HostnameConfig\nauto: off\nhostname: solcp02\n"
	sc.Cluster.ConfigPatches = []scenario.ConfigPatch{{Nodes: []string{"cp2", "cp3"}, Patch: same}}
	// cp3 joins once cp2 is a voter.
	sc.Cluster.Nodes = map[string]scenario.NodeOverride{"cp3": {EtcdImagePull: scenario.Duration{Duration: 3 * time.Minute}}}

	c := simtest.FromScenario(t, sc, 1)
	nodes := c.Nodes()
	cl := applyAndBootstrap(t, ctx, c, nodes[0].Endpoint)

	// A failure says what the nodes said (cp3's join, cp2's loop).
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("%s's machined log:\n%s", n.Name, strings.Join(c.Node(n.Name).Log("machined").Lines(), "\n"))
			}
		}
	})

	eventually(t, 90*time.Second, func() error {
		svcs, err := cl.ServiceInfo(client.WithNode(ctx, nodes[1].Address), "etcd")
		if err != nil {
			return err
		}

		if len(svcs) == 0 {
			return errors.New("cp2 lists no etcd service")
		}

		restarts := 0

		for _, e := range svcs[0].Service.GetEvents().GetEvents() {
			if strings.Contains(e.GetMsg(), "going to restart forever") {
				restarts++
			}
		}

		if restarts < 3 {
			return fmt.Errorf("cp2's etcd restarted %d times, not yet in a loop", restarts)
		}

		return nil
	})

	// cp3's join removes cp2's member of the same name, then adds its own
	// (retried when it fails: after cp2's removal etcd may need a new leader,
	// in real time) while cp2's etcd already restarts: the list is asked
	// until it holds cp3's member alone, as it does for good once added (seen
	// empty once under the package's load, stop 36).
	eventually(t, 30*time.Second, func() error {
		resp, err := cl.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
		if err != nil {
			return err
		}

		var named, all []string

		for _, m := range resp.GetMessages()[0].GetMembers() {
			if m.GetHostname() == "solcp02" {
				named = append(named, strings.Join(m.GetPeerUrls(), ","))
			}

			all = append(all, fmt.Sprintf("%x %q learner=%t %s", m.GetId(), m.GetHostname(), m.GetIsLearner(), strings.Join(m.GetPeerUrls(), ",")))
		}

		if len(named) != 1 || !strings.Contains(named[0], nodes[2].Address) {
			return fmt.Errorf("members named solcp02: %v, want only cp3's (%s); members: %s", named, nodes[2].Address, strings.Join(all, "; "))
		}

		return nil
	})
}
