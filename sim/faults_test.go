package sim_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/simtest"
)

// formed starts a cluster of n control planes and waits until all are voters.
func formed(t *testing.T, ctx context.Context, n int) *sim.Cluster {
	t.Helper()

	c := simtest.FromScenario(t, newScenario(n), 1)
	nodes := c.Nodes()

	cl := applyAndBootstrap(t, ctx, c, nodes[0].Endpoint)
	waitVoters(t, ctx, cl, n)

	return c
}

// secure is a client of the cluster's talosconfig, of node n.
// configuredCluster starts cps control planes, applies each its config and
// opens a talosconfig client to the first.
func configuredCluster(t *testing.T, ctx context.Context, cps int) (*sim.Cluster, []target.Node, *client.Client) {
	t.Helper()

	c := simtest.FromScenario(t, newScenario(cps), 1)
	nodes := c.Nodes()

	for _, n := range nodes {
		apply(t, ctx, n)
	}

	return c, nodes, secure(t, ctx, c, nodes[0])
}

func secure(t *testing.T, ctx context.Context, c *sim.Cluster, n target.Node) *client.Client {
	t.Helper()

	return secureAt(t, ctx, c, n.Endpoint)
}

// secureAt is a client of the cluster's talosconfig at endpoint, closed when
// the test ends.
func secureAt(t *testing.T, ctx context.Context, c *sim.Cluster, endpoint string) *client.Client {
	t.Helper()

	cl, err := talosclient.WithConfig(ctx, c.Talosconfig(), endpoint)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { cl.Close() }) //nolint:errcheck

	return cl
}

func waitVoters(t *testing.T, ctx context.Context, cl *client.Client, n int) {
	t.Helper()

	eventually(t, 2*time.Minute, func() error {
		resp, err := cl.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
		if err != nil {
			return err
		}

		voters := 0

		for _, m := range resp.Messages[0].Members {
			if !m.IsLearner && m.Hostname != "" {
				voters++
			}
		}

		if voters != n {
			return fmt.Errorf("%d voters, want %d", voters, n)
		}

		return nil
	})
}

// inject injects a fault of a kind at the time scale a run would use, and
// records that the kind's effect was tested (see TestMain).
func inject(t *testing.T, ctx context.Context, c *sim.Cluster, k chaos.Kind) target.Heal {
	t.Helper()

	injected.Store(k.Kind(), true)

	heal, err := k.Inject(ctx, &chaos.Env{Cluster: c, Clock: clock.New(60), Seed: 1})
	if err != nil {
		t.Fatalf("inject %s: %v", k.Kind(), err)
	}

	return heal
}

// raftIndex reads a node's raft index through its Talos API (EtcdStatus).
func raftIndex(ctx context.Context, cl *client.Client) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()

	st, err := cl.EtcdStatus(ctx)
	if err != nil {
		return 0, err
	}

	return st.Messages[0].MemberStatus.RaftIndex, nil
}

// writer puts keys through a node's etcd client port until stop is closed.
func writer(t *testing.T, ctx context.Context, c *sim.Cluster, node string) (stop func()) {
	t.Helper()

	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})

	go func() {
		defer close(done)

		ec, err := c.EtcdClient(ctx, node)
		if err != nil {
			return
		}
		defer ec.Close() //nolint:errcheck

		for i := 0; ctx.Err() == nil; i++ {
			wctx, wcancel := context.WithTimeout(ctx, time.Second)
			ec.Put(wctx, fmt.Sprintf("/test/%d", i%100), "v") //nolint:errcheck
			wcancel()
			time.Sleep(10 * time.Millisecond)
		}
	}()

	return func() {
		cancel()
		<-done
	}
}

// etcdIndex reads a member's raft index straight from its etcd (through its
// client port proxy, which isolation does not cut), so a node whose Talos API is
// unreachable can still be measured.
func etcdIndex(t *testing.T, ctx context.Context, c *sim.Cluster, node string) uint64 {
	t.Helper()

	ec, err := c.EtcdClient(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close() //nolint:errcheck

	// Each try has 2 s; a process the race detector and make test's other
	// lanes starve has missed that once, so it tries up to five times.
	for range 5 {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, serr := ec.Status(sctx, fmt.Sprintf("%s:2379", c.Node(node).Address()))
		cancel()

		if serr == nil {
			return st.RaftIndex
		}

		err = serr
	}

	t.Fatalf("%s status: %v", node, err)

	return 0
}

// progress reports whether each member's raft index moved during d.
func progress(t *testing.T, ctx context.Context, c *sim.Cluster, node, leader string, d time.Duration) (nodeMoved, leaderMoved bool) {
	t.Helper()

	n0, l0 := etcdIndex(t, ctx, c, node), etcdIndex(t, ctx, c, leader)

	time.Sleep(d)

	n1, l1 := etcdIndex(t, ctx, c, node), etcdIndex(t, ctx, c, leader)

	return n1 > n0, l1 > l0
}

// TestNetworkAndProcessFaults proves, on one formed cluster, that each fault
// takes effect and that healing it restores the node.
func TestNetworkAndProcessFaults(t *testing.T) {
	ctx, cancel := runningContext(8 * time.Minute)
	defer cancel()

	c := formed(t, ctx, 3)
	nodes := c.Nodes()
	cp1, cp2, cp3 := secure(t, ctx, c, nodes[0]), secure(t, ctx, c, nodes[1]), secure(t, ctx, c, nodes[2])

	stop := writer(t, ctx, c, "cp1")
	defer stop()

	// leader names the current etcd leader, as cp1's etcd sees it.
	leader := func(t *testing.T) string {
		t.Helper()

		st, err := cp1.EtcdStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}

		for i, cl := range []*client.Client{cp1, cp2, cp3} {
			s, err := cl.EtcdStatus(ctx)
			if err == nil && s.Messages[0].MemberStatus.MemberId == st.Messages[0].MemberStatus.Leader {
				return nodes[i].Name
			}
		}

		t.Fatal("no leader")

		return ""
	}

	t.Run("isolate stops the isolated member's raft progress while the majority commits", func(t *testing.T) {
		// The leader is asked before cp3 is cut off: an isolated cp3 cannot
		// say it leads, and the others may still name it for a moment.
		l := leader(t)
		if l == "cp3" {
			t.Skip("cp3 leads; isolating the leader is another test")
		}

		heal := inject(t, ctx, c, chaos.Isolate{Node: "cp3"})

		time.Sleep(500 * time.Millisecond) // let in-flight appends land

		moved, leaderMoved := progress(t, ctx, c, "cp3", l, time.Second)

		if moved || !leaderMoved {
			heal() //nolint:errcheck
			t.Fatalf("isolated cp3 moved=%v, majority moved=%v", moved, leaderMoved)
		}

		if _, err := cp3.Version(ctx); err == nil {
			t.Error("the engine still reaches the isolated node's API")
		}

		if err := heal(); err != nil {
			t.Fatal(err)
		}

		eventually(t, 30*time.Second, func() error {
			if moved, _ := progress(t, ctx, c, "cp3", l, 300*time.Millisecond); !moved {
				return errors.New("cp3 does not catch up after heal")
			}

			return nil
		})
	})

	t.Run("partition between the leader and one follower stops that follower", func(t *testing.T) {
		l := leader(t)

		follower := "cp2"
		if l == "cp2" {
			follower = "cp3"
		}

		heal := inject(t, ctx, c, chaos.Partition{Nodes: []chaos.Node{chaos.Node(l), chaos.Node(follower)}})

		time.Sleep(500 * time.Millisecond)
		moved, leaderMoved := progress(t, ctx, c, follower, l, time.Second)

		if err := heal(); err != nil {
			t.Fatal(err)
		}

		if moved || !leaderMoved {
			t.Fatalf("partitioned %s moved=%v, leader %s moved=%v", follower, moved, l, leaderMoved)
		}

		eventually(t, 30*time.Second, func() error {
			if moved, _ := progress(t, ctx, c, follower, l, 300*time.Millisecond); !moved {
				return errors.New("follower does not catch up after heal")
			}

			return nil
		})
	})

	t.Run("pause-etcd makes the member's health check fail until resumed", func(t *testing.T) {
		heal := inject(t, ctx, c, chaos.PauseEtcd{Node: "cp3"})

		eventually(t, 30*time.Second, func() error { return etcdHealthy(ctx, cp3, false) })

		if err := heal(); err != nil {
			t.Fatal(err)
		}

		eventually(t, 30*time.Second, func() error { return etcdHealthy(ctx, cp3, true) })
	})

	t.Run("pause-node: the node's API answers nothing until resumed", func(t *testing.T) {
		heal := inject(t, ctx, c, chaos.PauseNode{Node: "cp3"})

		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cp3.Version(callCtx)
		cancel()

		if status.Code(err) != codes.DeadlineExceeded {
			heal() //nolint:errcheck
			t.Fatalf("Version on a paused node: %v, want a deadline exceeded", err)
		}

		if err := heal(); err != nil {
			t.Fatal(err)
		}

		eventually(t, 30*time.Second, func() error {
			callCtx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()

			_, err := cp3.Version(callCtx)

			return err
		})
		eventually(t, 30*time.Second, func() error { return etcdHealthy(ctx, cp3, true) })
	})

	t.Run("blackhole on the etcd client port swallows requests", func(t *testing.T) {
		heal := inject(t, ctx, c, chaos.Blackhole{Node: "cp2", Port: "etcd-client"})

		if err := getThroughProxy(ctx, c, "cp2"); err == nil {
			heal() //nolint:errcheck
			t.Fatal("a request went through the blackhole")
		}

		if err := heal(); err != nil {
			t.Fatal(err)
		}

		eventually(t, 30*time.Second, func() error { return getThroughProxy(ctx, c, "cp2") })
	})

	t.Run("latency delays API round trips", func(t *testing.T) {
		heal := inject(t, ctx, c, chaos.Latency{Node: "cp2", Port: "talos-api", Latency: scenario.Duration{Duration: 150 * time.Millisecond}})

		start := time.Now()
		_, err := cp2.Version(ctx)
		rtt := time.Since(start)

		if err := heal(); err != nil {
			t.Fatal(err)
		}

		if err != nil || rtt < 150*time.Millisecond {
			t.Fatalf("round trip %s (%v), want at least 150ms", rtt, err)
		}

		start = time.Now()
		if _, err := cp2.Version(ctx); err != nil || time.Since(start) > 150*time.Millisecond {
			t.Fatalf("after heal: %s (%v)", time.Since(start), err)
		}
	})

	t.Run("bandwidth slows a large read", func(t *testing.T) {
		ec, err := c.EtcdClient(ctx, "cp2")
		if err != nil {
			t.Fatal(err)
		}
		defer ec.Close() //nolint:errcheck

		if _, err := ec.Put(ctx, "/test/big", strings.Repeat("x", 64<<10)); err != nil {
			t.Fatal(err)
		}

		heal := inject(t, ctx, c, chaos.Bandwidth{Node: "cp2", Port: "etcd-client", Direction: "downstream", RateKBps: 32})

		took := timeGet(ctx, c, "cp2", "/test/big")

		if err := heal(); err != nil {
			t.Fatal(err)
		}

		if took < time.Second {
			t.Fatalf("64 KiB at 32 KB/s took %s", took)
		}

		if took := timeGet(ctx, c, "cp2", "/test/big"); took > time.Second {
			t.Fatalf("after heal the read still took %s", took)
		}
	})

	t.Run("reset breaks API calls", func(t *testing.T) {
		heal := inject(t, ctx, c, chaos.Reset{Node: "cp2", Port: "talos-api"})

		fresh := secure(t, ctx, c, nodes[1])

		callCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := fresh.Version(callCtx)
		cancel()

		if err := heal(); err != nil {
			t.Fatal(err)
		}

		if err == nil {
			t.Fatal("a call went through the reset toxic")
		}

		eventually(t, 30*time.Second, func() error {
			_, err := secure(t, ctx, c, nodes[1]).Version(ctx)

			return err
		})
	})

	t.Run("slow-close delays the close of a connection", func(t *testing.T) {
		heal := inject(t, ctx, c, chaos.SlowClose{Node: "cp2", Port: "etcd-client", Direction: "downstream", Delay: scenario.Duration{Duration: 700 * time.Millisecond}})

		took := closeDelay(t, c, "cp2")

		if err := heal(); err != nil {
			t.Fatal(err)
		}

		if took < 700*time.Millisecond {
			t.Fatalf("the close reached the client after %s", took)
		}

		if took := closeDelay(t, c, "cp2"); took > 500*time.Millisecond {
			t.Fatalf("after heal the close took %s", took)
		}
	})

	t.Run("crash-etcd kills etcd and Talos restarts it from its data", func(t *testing.T) {
		before := memberID(ctx, t, cp3)

		inject(t, ctx, c, chaos.CrashEtcd{Node: "cp3"})

		eventually(t, 30*time.Second, func() error {
			// The failure quotes the task's last log lines
			// (runner/containerd/containerd.go Run, lastlog.go).
			return etcdEvent(ctx, cp3, `going to restart forever: task "etcd" failed: exit code 137 (last log "{\"level\":`)
		})
		eventually(t, 30*time.Second, func() error { return etcdHealthy(ctx, cp3, true) })

		if after := memberID(ctx, t, cp3); after != before {
			t.Fatalf("member ID changed %x → %x: etcd did not restart from its data", before, after)
		}
	})

	t.Run("reboot brings the node back with its data", func(t *testing.T) {
		before := memberID(ctx, t, cp3)

		inject(t, ctx, c, chaos.Reboot{Node: "cp3"})

		eventually(t, 30*time.Second, func() error {
			if _, err := cp3.Version(ctx); err == nil {
				return errors.New("still up")
			}

			return nil
		})
		eventually(t, time.Minute, func() error { return etcdHealthy(ctx, cp3, true) })

		if after := memberID(ctx, t, cp3); after != before {
			t.Fatalf("member ID changed %x → %x", before, after)
		}
	})

	t.Run("power-off keeps the node down until healed", func(t *testing.T) {
		heal := inject(t, ctx, c, chaos.PowerOff{Node: "cp3"})

		eventually(t, 30*time.Second, func() error {
			if _, err := cp3.Version(ctx); err == nil {
				return errors.New("still up")
			}

			return nil
		})

		time.Sleep(time.Second) // well past the simulated reboot time

		if _, err := cp3.Version(ctx); err == nil {
			t.Fatal("a powered-off node answered")
		}

		// A power cut publishes nothing: the last MachineStatus cp3 gave
		// (what a watch on it had) is the running one, not a reboot's.
		ms, err := safe.StateGetByID[*runtime.MachineStatus](ctx, c.Node("cp3").Resources(), runtime.MachineStatusID)
		if err != nil {
			t.Fatal(err)
		}

		if st := ms.TypedSpec().Stage; st != runtime.MachineStageRunning {
			t.Errorf("cp3's last machine stage before its power was cut: %s, want running", st)
		}

		if err := heal(); err != nil {
			t.Fatal(err)
		}

		eventually(t, time.Minute, func() error { return etcdHealthy(ctx, cp3, true) })
	})

	t.Run("wipe-etcd makes the node join again with its config", func(t *testing.T) {
		before := memberID(ctx, t, cp3)

		inject(t, ctx, c, chaos.WipeEtcd{Node: "cp3"})

		eventually(t, 2*time.Minute, func() error {
			if err := etcdHealthy(ctx, cp3, true); err != nil {
				return err
			}

			if after := memberID(ctx, t, cp3); after == before {
				return errors.New("same member: data not wiped yet")
			}

			return nil
		})
		waitVoters(t, ctx, cp1, 3)
	})

	// Last: cp3 stays out of the cluster for good.
	t.Run("remove-member removes the member and its etcd crash-loops on its data", func(t *testing.T) {
		cp3Gone := func() error {
			list, err := cp1.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
			if err != nil {
				return err
			}

			for _, m := range list.Messages[0].Members {
				if m.Hostname == "cp3" {
					return errors.New("cp3 still listed")
				}
			}

			return nil
		}

		// etcd refuses to remove a member not connected for 5 s (the wipe just
		// made cp3 a new member): retried as an operator would. An attempt
		// whose reply did not come may still have removed it (under load,
		// applied after the call gave up): the next one then finds no member
		// to remove, and the removal is done.
		eventually(t, time.Minute, func() error {
			_, err := chaos.RemoveMember{Node: "cp3"}.Inject(ctx, &chaos.Env{Cluster: c, Clock: clock.New(60), Seed: 1})
			if err != nil && cp3Gone() == nil {
				return nil
			}

			return err
		})
		injected.Store(chaos.RemoveMember{}.Kind(), true)

		eventually(t, time.Minute, cp3Gone)

		// restart.Forever starts it from its data, and it exits again, again.
		eventually(t, time.Minute, func() error {
			s, err := etcdService(ctx, cp3)
			if err != nil {
				return err
			}

			restarts := 0

			for _, e := range s.Events.Events {
				if strings.Contains(e.Msg, `going to restart forever: task "etcd" failed: exit code`) {
					restarts++
				}
			}

			if restarts < 3 {
				return fmt.Errorf("%d restarts of etcd on cp3", restarts)
			}

			return nil
		})
	})
}

// TestResetAndAPIFaults covers faults that take a node back to maintenance or
// act on single calls.
func TestResetAndAPIFaults(t *testing.T) {
	ctx, cancel := runningContext(5 * time.Minute)
	defer cancel()

	c := simtest.FromScenario(t, newScenario(2), 1)
	nodes := c.Nodes()

	t.Run("api-fail refuses the first calls with the chosen code", func(t *testing.T) {
		heal := inject(t, ctx, c, chaos.APIFail{Node: "cp1", RPC: "ApplyConfiguration", Code: "Unavailable", Count: 2})
		defer heal() //nolint:errcheck

		ins := insecureClient(t, ctx, nodes[0])

		for i := range 2 {
			_, err := ins.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: nodes[0].Config, Mode: machine.ApplyConfigurationRequest_AUTO})
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("call %d: %v, want Unavailable", i, err)
			}
		}

		if _, err := ins.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: nodes[0].Config, Mode: machine.ApplyConfigurationRequest_AUTO}); err != nil {
			t.Fatalf("the third call: %v", err)
		}
	})

	t.Run("api-drop-reply applies, then the caller times out", func(t *testing.T) {
		heal := inject(t, ctx, c, chaos.APIDropReply{Node: "cp2", RPC: "ApplyConfiguration", Count: 1})
		defer heal() //nolint:errcheck

		ins := insecureClient(t, ctx, nodes[1])

		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := ins.ApplyConfiguration(callCtx, &machine.ApplyConfigurationRequest{Data: nodes[1].Config, Mode: machine.ApplyConfigurationRequest_AUTO})
		cancel()

		// The reply never comes: the caller's deadline passes, or the node closes
		// the connection first as it leaves maintenance. Either way no answer.
		if c := status.Code(err); c != codes.DeadlineExceeded && c != codes.Unavailable {
			t.Fatalf("%v, want DeadlineExceeded or Unavailable", err)
		}

		// Applied all the same: the node leaves maintenance.
		cl := secure(t, ctx, c, nodes[1])
		eventually(t, 30*time.Second, func() error {
			_, err := cl.Version(ctx)

			return err
		})
	})

	t.Run("api-delay lets the reply come late", func(t *testing.T) {
		cl := secure(t, ctx, c, nodes[0])
		eventually(t, 30*time.Second, func() error {
			_, err := cl.Version(ctx)

			return err
		})

		heal := inject(t, ctx, c, chaos.APIDelay{Node: "cp1", RPC: "Bootstrap", Delay: scenario.Duration{Duration: 30 * time.Second}, Count: 1})
		defer heal() //nolint:errcheck

		start := time.Now()

		if err := cl.Bootstrap(ctx, &machine.BootstrapRequest{}); err != nil {
			t.Fatal(err)
		}

		// 30 s of Talos time at scale 60.
		if took := time.Since(start); took < 400*time.Millisecond {
			t.Fatalf("the reply came after %s", took)
		}
	})

	t.Run("reset-node takes the node back to maintenance", func(t *testing.T) {
		inject(t, ctx, c, chaos.ResetNode{Node: "cp2", Graceful: false})

		eventually(t, time.Minute, func() error {
			_, err := insecureClient(t, ctx, nodes[1]).Disks(ctx)

			return err
		})
	})
}

func insecureClient(t *testing.T, ctx context.Context, n target.Node) *client.Client {
	t.Helper()

	cl, err := talosclient.Insecure(ctx, n.Endpoint)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { cl.Close() }) //nolint:errcheck

	return cl
}

func etcdService(ctx context.Context, cl *client.Client) (*machine.ServiceInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()

	resp, err := cl.ServiceList(ctx)
	if err != nil {
		return nil, err
	}

	for _, s := range resp.Messages[0].Services {
		if s.Id == "etcd" {
			return s, nil
		}
	}

	return nil, errors.New("no etcd service")
}

func etcdHealthy(ctx context.Context, cl *client.Client, want bool) error {
	s, err := etcdService(ctx, cl)
	if err != nil {
		return err
	}

	if got := s.State == "Running" && s.Health.Healthy; got != want {
		return fmt.Errorf("etcd %s healthy=%v (%s), want healthy=%v", s.State, s.Health.Healthy, s.Health.LastMessage, want)
	}

	return nil
}

func etcdEvent(ctx context.Context, cl *client.Client, text string) error {
	s, err := etcdService(ctx, cl)
	if err != nil {
		return err
	}

	for _, e := range s.Events.Events {
		if strings.Contains(e.Msg, text) {
			return nil
		}
	}

	return fmt.Errorf("no etcd event %q", text)
}

func memberID(ctx context.Context, t *testing.T, cl *client.Client) uint64 {
	t.Helper()

	var id uint64

	eventually(t, 30*time.Second, func() error {
		st, err := cl.EtcdStatus(ctx)
		if err != nil {
			return err
		}

		id = st.Messages[0].MemberStatus.MemberId

		return nil
	})

	return id
}

// getThroughProxy reads a key through the node's public etcd client port.
func getThroughProxy(ctx context.Context, c *sim.Cluster, node string) error {
	ec, err := c.EtcdClient(ctx, node)
	if err != nil {
		return err
	}
	defer ec.Close() //nolint:errcheck

	getCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()

	_, err = ec.Get(getCtx, "/test/0", clientv3.WithSerializable())

	return err
}

func timeGet(ctx context.Context, c *sim.Cluster, node, key string) time.Duration {
	ec, err := c.EtcdClient(ctx, node)
	if err != nil {
		return 0
	}
	defer ec.Close() //nolint:errcheck

	start := time.Now()
	ec.Get(ctx, key, clientv3.WithSerializable()) //nolint:errcheck

	return time.Since(start)
}

// closeDelay sends etcd's client port something that is not HTTP/2, which makes
// the server close the connection, and times how long until the client sees it.
func closeDelay(t *testing.T, c *sim.Cluster, node string) time.Duration {
	t.Helper()

	addr := fmt.Sprintf("%s:2379", c.Node(node).Address())

	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close() //nolint:errcheck

	conn.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck

	start := time.Now()

	if _, err := conn.Write([]byte("not a TLS handshake\r\n\r\n")); err != nil {
		t.Fatal(err)
	}

	buf := make([]byte, 1024)
	for {
		if _, err := conn.Read(buf); err != nil {
			return time.Since(start)
		}
	}
}
