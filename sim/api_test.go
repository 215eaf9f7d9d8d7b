package sim_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/simtest"
)

func newScenario(cps int) *scenario.Scenario {
	return &scenario.Scenario{
		Name:      "api-test",
		Talos:     scenario.DefaultProfile,
		TimeScale: 60,
		Cluster:   scenario.Cluster{ControlPlanes: cps},
	}
}

// applyAndBootstrap applies every node's config through the maintenance
// API, then bootstraps etcd through the talosconfig client at endpoint,
// which it returns.
func applyAndBootstrap(t *testing.T, ctx context.Context, c *sim.Cluster, endpoint string) *client.Client {
	t.Helper()

	for _, n := range c.Nodes() {
		apply(t, ctx, n)
	}

	cl := secureAt(t, ctx, c, endpoint)
	eventually(t, 30*time.Second, func() error { return cl.Bootstrap(ctx, &machine.BootstrapRequest{}) })

	return cl
}

func apply(t *testing.T, ctx context.Context, n target.Node) {
	t.Helper()

	var c *client.Client

	eventually(t, 30*time.Second, func() error {
		var err error

		c, err = talosclient.Insecure(ctx, n.Endpoint)
		if err != nil {
			return err
		}

		_, err = c.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: n.Config, Mode: machine.ApplyConfigurationRequest_AUTO})
		if err != nil {
			c.Close() //nolint:errcheck
		}

		return err
	})

	c.Close() //nolint:errcheck
}

func TestMaintenanceThenMutualTLS(t *testing.T) {
	ctx, cancel := runningContext(2 * time.Minute)
	defer cancel()

	c := simtest.FromScenario(t, newScenario(1), 1)
	n := c.Nodes()[0]

	// Before apply: the insecure client works, etcd RPCs are not implemented (v1.12).
	eventually(t, 30*time.Second, func() error {
		ic, err := talosclient.Insecure(ctx, n.Endpoint)
		if err != nil {
			return err
		}
		defer ic.Close() //nolint:errcheck

		_, err = ic.Disks(ctx)

		return err
	})

	ic, err := talosclient.Insecure(ctx, n.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close() //nolint:errcheck

	err = ic.Bootstrap(ctx, &machine.BootstrapRequest{})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "method Bootstrap not implemented") {
		t.Fatalf("bootstrap in maintenance: %v", err)
	}

	_, err = ic.Version(ctx)
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "API is not implemented in maintenance mode") {
		t.Fatalf("version in maintenance: %v", err)
	}

	// A talosconfig client does not trust the maintenance certificate.
	sc := secureAt(t, ctx, c, n.Endpoint)

	if _, err = sc.Version(ctx); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("talosconfig against maintenance: %v", err)
	}

	apply(t, ctx, n)

	// After apply: the insecure client is refused with "certificate required".
	eventually(t, 30*time.Second, func() error {
		ic2, err := talosclient.Insecure(ctx, n.Endpoint)
		if err != nil {
			return err
		}
		defer ic2.Close() //nolint:errcheck

		_, err = ic2.Disks(ctx)
		if err == nil {
			return errors.New("the insecure client still works: the node is in maintenance")
		}

		if !strings.Contains(err.Error(), "tls: certificate required") {
			return err
		}

		if status.Code(err) != codes.Unavailable {
			t.Errorf("code %v, want Unavailable: %v", status.Code(err), err)
		}

		return nil
	})

	// A talosconfig from other secrets: unknown authority.
	other, err := sim.NewSecretsBundle(config.TalosVersionCurrent)
	if err != nil {
		t.Fatal(err)
	}

	in, err := generate.NewInput("other", "https://127.0.0.1:6443", sim.KubernetesVersion, generate.WithSecretsBundle(other), generate.WithEndpointList([]string{n.Address}))
	if err != nil {
		t.Fatal(err)
	}

	otherCfg, err := in.Talosconfig()
	if err != nil {
		t.Fatal(err)
	}

	oc, err := talosclient.WithConfig(ctx, otherCfg, n.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close() //nolint:errcheck

	if _, err = oc.Version(ctx); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("other secrets: %v", err)
	}

	// The right talosconfig works.
	eventually(t, 30*time.Second, func() error {
		v, err := sc.Version(ctx)
		if err != nil {
			return err
		}

		if got := v.Messages[0].GetPlatform().GetMode(); got != "container" {
			t.Errorf("platform mode %q", got)
		}

		return nil
	})

	ms, err := safe.StateGetByID[*runtime.MachineStatus](ctx, sc.COSI, runtime.MachineStatusID)
	if err != nil {
		t.Fatalf("machine status: %v", err)
	}

	if ms.TypedSpec().Stage != runtime.MachineStageBooting && ms.TypedSpec().Stage != runtime.MachineStageRunning {
		t.Fatalf("stage %s", ms.TypedSpec().Stage)
	}
}

func TestThreeMembersFormAndLearnerFlagsMatchEtcd(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	c := simtest.FromScenario(t, newScenario(3), 1)
	nodes := c.Nodes()

	cl := applyAndBootstrap(t, ctx, c, nodes[0].Endpoint)

	// A second bootstrap finds the data dir in use.
	eventually(t, 30*time.Second, func() error {
		err := cl.Bootstrap(ctx, &machine.BootstrapRequest{})
		if status.Code(err) == codes.AlreadyExists && strings.Contains(err.Error(), "etcd data directory is not empty") {
			return nil
		}

		return err
	})

	// Promotion only goes one way, so compare etcd's own status with a member
	// list read before it (a learner then was a learner in the list) and one read
	// after it (a voter then is a voter in the list).
	list := func() (map[string]bool, int, error) {
		resp, err := cl.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
		if err != nil {
			return nil, 0, err
		}

		learner := map[string]bool{}
		voters := 0

		for _, m := range resp.Messages[0].Members {
			learner[m.Hostname] = m.IsLearner

			if !m.IsLearner {
				voters++
			}
		}

		return learner, voters, nil
	}

	sawLearner := false

	eventually(t, 90*time.Second, func() error {
		before, _, err := list()
		if err != nil {
			return err
		}

		statuses := map[string]bool{}

		for name := range before {
			mc, err := talosclient.WithConfig(ctx, c.Talosconfig(), memberEndpoint(nodes, name))
			if err != nil {
				return err
			}

			st, err := mc.EtcdStatus(ctx)
			mc.Close() //nolint:errcheck

			if err != nil {
				return err
			}

			statuses[name] = st.Messages[0].MemberStatus.IsLearner
		}

		after, voters, err := list()
		if err != nil {
			return err
		}

		for name, isLearner := range statuses {
			if isLearner {
				sawLearner = true

				if !before[name] {
					t.Errorf("%s: etcd status says learner, the member list read before it says voter", name)
				}
			} else if after[name] {
				t.Errorf("%s: etcd status says voter, the member list read after it says learner", name)
			}
		}

		if len(after) != 3 || voters != 3 {
			return fmt.Errorf("members %d voters %d", len(after), voters)
		}

		return nil
	})

	if !sawLearner {
		t.Log("no learner was caught in the act; only voters were compared")
	}
}

func memberEndpoint(nodes []target.Node, hostname string) string {
	for _, n := range nodes {
		if n.Name == hostname {
			return n.Endpoint
		}
	}

	return ""
}

func TestCloseFreesPortsAndTempDir(t *testing.T) {
	ctx, cancel := runningContext(time.Minute)
	defer cancel()

	c, err := sim.NewCluster(ctx, newScenario(1), 1)
	if err != nil {
		t.Fatal(err)
	}

	n := c.Nodes()[0]
	apply(t, ctx, n)

	// Bootstrap so that etcd's own listeners are up too.
	cl := secureAt(t, ctx, c, n.Endpoint)

	eventually(t, 30*time.Second, func() error { return cl.Bootstrap(ctx, &machine.BootstrapRequest{}) })
	eventually(t, 30*time.Second, func() error {
		_, err := cl.EtcdStatus(ctx)

		return err
	})

	dir := c.Dir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("temp dir: %v", err)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s still there: %v", dir, err)
	}

	// Every port the node served must be free again.
	for _, port := range []int{50000, 2379, 2380, 25000, 22379, 22380} {
		l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", n.Address, port))
		if err != nil {
			t.Errorf("port %d still in use: %v", port, err)

			continue
		}

		l.Close() //nolint:errcheck
	}
}

// A member that never gets ready (it restarted without a quorum to publish
// itself to) must not hold up Close: etcd's own embed.Close would wait for its
// client servers forever.
func TestCloseWithAMemberThatNeverGetsReady(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	c := formed(t, ctx, 2)
	cp1, cl := secure(t, ctx, c, c.Nodes()[0]), secure(t, ctx, c, c.Nodes()[1])

	// cp1 goes down for good, then cp2 restarts without a quorum to publish to.
	inject(t, ctx, c, chaos.PowerOff{Node: "cp1"})
	eventually(t, time.Minute, func() error {
		if _, err := cp1.Version(ctx); err == nil {
			return errors.New("cp1 still answers")
		}

		return nil
	})

	started := func() (string, error) {
		s, err := etcdService(ctx, cl)
		if err != nil {
			return "", err
		}

		for _, e := range slices.Backward(s.Events.Events) {
			if strings.HasPrefix(e.Msg, "Started task etcd") {
				return e.Msg, nil
			}
		}

		return "", errors.New("etcd not started")
	}

	before, err := started()
	if err != nil {
		t.Fatal(err)
	}

	inject(t, ctx, c, chaos.Reboot{Node: "cp2"})
	eventually(t, time.Minute, func() error {
		if msg, err := started(); err != nil || msg == before {
			return fmt.Errorf("etcd not restarted yet (%v)", err)
		}

		return nil
	})

	closed := make(chan error, 1)

	go func() { closed <- c.Close() }()

	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close still waiting after a minute")
	}
}

// A hostname in the config (machine.network.hostname, as FR-000's solcp01–03)
// names the node's etcd member, as on Talos; the others keep their node
// names.
func TestHostnameFromTheConfigNamesTheMember(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	sc := newScenario(2)
	// v1.12 configs hold a HostnameConfig document (auto: stable); a static
	// hostname replaces it there, as talosctl gen config --config-patch does.
	sc.Cluster.ConfigPatches = []scenario.ConfigPatch{{Nodes: []string{"cp2"}, Patch: "apiVersion: v1alpha1\nkind: HostnameConfig\nauto: off\nhostname: solcp02\n"}}

	c := simtest.FromScenario(t, sc, 1)
	nodes := c.Nodes()

	cl := applyAndBootstrap(t, ctx, c, nodes[0].Endpoint)

	eventually(t, 90*time.Second, func() error {
		resp, err := cl.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
		if err != nil {
			return err
		}

		var names []string

		for _, m := range resp.Messages[0].Members {
			if !m.IsLearner {
				names = append(names, m.Hostname)
			}
		}

		slices.Sort(names)

		if !slices.Equal(names, []string{"cp1", "solcp02"}) {
			return fmt.Errorf("voters %v, want cp1 and solcp02", names)
		}

		return nil
	})
}

// Talos's EtcdStatus asks the local member through clientv3's Status, which
// dials a connection of its own per call; the sim's API asks over its local
// client's connection, so that the observer's looks cost no handshake each.
// The member's answer is the same (its ID, a voter).
func TestEtcdStatusDialsNoConnectionPerCall(t *testing.T) {
	ctx, cancel := runningContext(2 * time.Minute)
	defer cancel()

	c := simtest.FromScenario(t, newScenario(1), 1)
	n := c.Nodes()[0]
	cl := applyAndBootstrap(t, ctx, c, n.Endpoint)

	var id uint64

	eventually(t, time.Minute, func() error {
		st, err := cl.EtcdStatus(ctx)
		if err != nil {
			return err
		}

		id = st.GetMessages()[0].GetMemberStatus().GetMemberId()

		return nil
	})

	local := c.Node(n.Name).EtcdClientEndpoint()
	before := c.DialsTo(local)

	const calls = 20

	for range calls {
		st, err := cl.EtcdStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}

		if ms := st.GetMessages()[0].GetMemberStatus(); ms.GetMemberId() != id || ms.GetIsLearner() {
			t.Fatalf("status %v, want member %x, a voter", ms, id)
		}
	}

	// A dial or two may come from the node's own loops (its health check
	// starting); one per call is what clientv3's Status would make.
	if d := c.DialsTo(local) - before; d >= calls/2 {
		t.Errorf("%d EtcdStatus calls dialled the member %d times, want no dial per call", calls, d)
	}
}
