package check

import (
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talchaos/talchaos/harness/target"
)

func TestRunningSince(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := func(sec int, state, msg string) *machine.ServiceEvent {
		return &machine.ServiceEvent{State: state, Msg: msg, Ts: timestamppb.New(t0.Add(time.Duration(sec) * time.Second))}
	}

	boot := []*machine.ServiceEvent{
		ev(0, "Starting", "Starting service"),
		ev(1, "Waiting", `Waiting for service "cri" to be "up", time sync, network, etcd spec`),
		ev(2, "Preparing", "Running pre state"),
		ev(9, "Preparing", "Creating service runner"),
		ev(10, "Running", "Started task etcd (PID 2) for container etcd"),
		ev(15, "Running", "Health check failed: etcdserver: rpc not supported for learner"),
	}

	for _, tc := range []struct {
		name   string
		events []*machine.ServiceEvent
		want   int // seconds after t0; -1: zero time
	}{
		{"health events do not restart it", boot, 10},
		{"a crash of etcd does not restart the promote loop", append(boot[:6:6],
			ev(20, "Waiting", "Error running Containerd(etcd), going to restart forever: exit code 137"),
			ev(25, "Running", "Started task etcd (PID 3) for container etcd")), 10},
		{"a new start of the service does", append(boot[:6:6],
			ev(30, "Finished", "Service finished successfully"),
			ev(31, "Starting", "Starting service"),
			ev(40, "Running", "Started task etcd (PID 4) for container etcd")), 40},
		{"a history that no longer reaches the start", boot[4:], 10},
		{"never running", boot[:4], -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runningSince(tc.events)

			want := time.Time{}
			if tc.want >= 0 {
				want = t0.Add(time.Duration(tc.want) * time.Second)
			}

			if !got.Equal(want) {
				t.Errorf("running since %v, want %v", got, want)
			}
		})
	}
}

// A node's next answer comes within its poll interval (workers are polled
// less often) and a poll's deadline.
func TestPollCadence(t *testing.T) {
	cp := target.Node{Name: "cp1", Role: target.ControlPlane}
	worker := target.Node{Name: "w1", Role: target.Worker}

	for _, tc := range []struct {
		name  string
		nodes []target.Node
		want  time.Duration
	}{
		{"control planes", []target.Node{cp}, 100*time.Millisecond + pollTimeout},
		{"with a worker", []target.Node{cp, worker}, workerPollFactor*100*time.Millisecond + pollTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Observer{nodes: tc.nodes, interval: 100 * time.Millisecond}
			if got := o.PollCadence(); got != tc.want {
				t.Errorf("poll cadence %s, want %s", got, tc.want)
			}
		})
	}
}
