package sim_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/simtest"
)

// helloFailed is DiscoveryServiceController's log line while a node has no
// route to discovery.talos.dev (talos #10136, v1.12.6 console format).
const helloFailed = `hello failed {"component": "controller-runtime", "controller": "cluster.DiscoveryServiceController", ` +
	`"error": "rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing: dial tcp 172.174.35.21:443: connect: no route to host\"", ` +
	`"endpoint": "discovery.talos.dev:443"}`

// A control plane cut off from the discovery service (discovery-unreachable)
// or given a partial list (discovery-partial) knows only the control planes
// it discovered, itself always (etcd.GetEndpoints over its Members): with no
// running voter among them its etcd join loop fails, in Preparing, until
// healed; then it joins. The others' members lack a node cut off from the
// start (it never pushed its entry).
func TestDiscoveryFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cps   int
		w     int
		fault chaos.Kind
		// hello: the node logs "hello failed".
		hello bool
		// members are cp2's members while the fault holds, cp1's: whether
		// it lists cp2.
		members    []string
		cp1SeesCp2 bool
		all        []string
	}{
		{name: "unreachable from the start", cps: 3, fault: chaos.DiscoveryUnreachable{Node: "cp2"}, hello: true,
			members: []string{"cp2"}, all: []string{"cp1", "cp2", "cp3"}},
		{name: "partial: the bootstrap node hidden", cps: 2, w: 1, fault: chaos.DiscoveryPartial{Node: "cp2", Hide: []chaos.Node{"cp1"}},
			members: []string{"cp2", "w1"}, cp1SeesCp2: true, all: []string{"cp1", "cp2", "w1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := runningContext(3 * time.Minute)
			defer cancel()

			sc := newScenario(tc.cps)
			sc.Cluster.Workers = tc.w
			c := simtest.FromScenario(t, sc, 1)
			nodes := c.Nodes()
			heal := inject(t, ctx, c, tc.fault)

			cl := applyAndBootstrap(t, ctx, c, nodes[0].Endpoint)
			cp1, cp2 := client.WithNode(ctx, nodes[0].Address), client.WithNode(ctx, nodes[1].Address)

			// The others join through cp1; cp2 does not.
			waitVoters(t, ctx, cl, tc.cps-1)

			// Its only endpoint is its own, where no etcd answers: each attempt
			// runs out its 30 s (go-retry logs each error once).
			eventually(t, 30*time.Second, func() error { return logHas(c, "cp2", "retrying error: timeout") })

			if err := serviceMessage(cp2, cl, "etcd", "Preparing", "Running pre state"); err != nil {
				t.Error(err)
			}

			if err := membersAre(cp2, cl, tc.members); err != nil {
				t.Error(err)
			}

			if got, _ := memberNames(cp1, cl); slices.Contains(got, "cp2") != tc.cp1SeesCp2 {
				t.Errorf("cp1's members %v: cp2 listed %v, want %v", got, !tc.cp1SeesCp2, tc.cp1SeesCp2)
			}

			if tc.hello {
				eventually(t, 10*time.Second, func() error { return logHas(c, "cp2", helloFailed) })
			} else if err := logHas(c, "cp2", "hello failed"); err == nil {
				t.Error("cp2 logged hello failed with the service reachable")
			}

			if err := heal(); err != nil {
				t.Fatal(err)
			}

			waitVoters(t, ctx, cl, tc.cps)
			eventually(t, 10*time.Second, func() error { return membersAre(cp1, cl, tc.all) })
		})
	}
}

// logHas is nil once the node's machined log has a line ending in text.
func logHas(c *sim.Cluster, node, text string) error {
	lines := c.Node(node).Log("machined").Lines()
	for _, l := range lines {
		if strings.HasSuffix(l, text) {
			return nil
		}
	}

	return fmt.Errorf("%s: no %q in its log:\n%s", node, text, strings.Join(lines, "\n"))
}

// memberNames are the node's cluster Members (`talosctl get members`).
func memberNames(ctx context.Context, cl *client.Client) ([]string, error) {
	list, err := safe.StateListAll[*cluster.Member](ctx, cl.COSI)
	if err != nil {
		return nil, err
	}

	var out []string

	for m := range list.All() {
		out = append(out, m.Metadata().ID())
	}

	slices.Sort(out)

	return out, nil
}

func membersAre(ctx context.Context, cl *client.Client, want []string) error {
	got, err := memberNames(ctx, cl)
	if err != nil {
		return err
	}

	if !slices.Equal(got, want) {
		return fmt.Errorf("members %v, want %v", got, want)
	}

	return nil
}

// A node cut off after it reached the service keeps what it received and
// the service keeps its entry (DiscoveryServiceController, discovery-client
// parseReply): its etcd joins through the voter it knew. A reboot loses what
// it received (the client's list is in memory), but its etcd starts from its
// data and needs no endpoint. The service drops its entry once the 30-minute
// TTL has run out unrefreshed; healed, both views catch up.
func TestDiscoveryCutAfterRegistration(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	c, nodes, cl := configuredCluster(t, ctx, 2)
	cp1, cp2 := client.WithNode(ctx, nodes[0].Address), client.WithNode(ctx, nodes[1].Address)
	both := []string{"cp1", "cp2"}

	eventually(t, 30*time.Second, func() error { return membersAre(cp2, cl, both) })

	heal := inject(t, ctx, c, chaos.DiscoveryUnreachable{Node: "cp2"})
	cut := time.Now()

	eventually(t, 30*time.Second, func() error { return cl.Bootstrap(cp1, &machine.BootstrapRequest{}) })
	waitVoters(t, ctx, cl, 2)
	eventually(t, 10*time.Second, func() error { return logHas(c, "cp2", helloFailed) })

	for _, n := range []context.Context{cp1, cp2} {
		if err := membersAre(n, cl, both); err != nil {
			t.Error(err)
		}
	}

	inject(t, ctx, c, chaos.Reboot{Node: "cp2"})
	eventually(t, time.Minute, func() error { return etcdHealthy(cp2, cl, true) })

	// Asked once it answers the list at all (a first call through a
	// connection the reboot broke may end in EOF under load).
	eventually(t, 30*time.Second, func() error { _, err := memberNames(cp2, cl); return err })

	if err := membersAre(cp2, cl, []string{"cp2"}); err != nil {
		t.Errorf("after the reboot: %v", err)
	}

	// The TTL: 30 Talos minutes after the cut, 30 s at newScenario's scale.
	ttl := clock.New(60).Wall(30 * time.Minute)

	eventually(t, ttl+20*time.Second, func() error { return membersAre(cp1, cl, []string{"cp1"}) })

	if since := time.Since(cut); since < ttl {
		t.Errorf("cp2's entry dropped %s after the cut, before its TTL %s", since, ttl)
	}

	if err := heal(); err != nil {
		t.Fatal(err)
	}

	for _, n := range []context.Context{cp1, cp2} {
		eventually(t, 10*time.Second, func() error { return membersAre(n, cl, both) })
	}
}
