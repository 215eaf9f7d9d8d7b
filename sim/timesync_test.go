package sim_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	timeres "github.com/siderolabs/talos/pkg/machinery/resources/time"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/sim/simtest"
)

// A node whose time servers never answer (time-unsynced) is held as Talos
// v1.12.6 holds it (controllers/time/sync.go; services/etcd.go and
// kubelet.go Condition; v1alpha1_server.go Bootstrap): TimeStatus not
// synced, etcd and kubelet "Waiting for time sync", MachineStatus's "time"
// check unmet, Bootstrap FailedPrecondition "time is not in sync yet" after
// its 5 s wait, `talosctl time` failing as the NTP query's read times out.
// machine.time.bootTimeout lets the time count as synced once that long has
// passed since boot; machine.time.disabled, at once; a heal, at the
// syncer's next retry.
func TestTimeUnsynced(t *testing.T) {
	ntpTimeout := regexp.MustCompile(`^rpc error: code = Unknown desc = error querying NTP server "time\.cloudflare\.com": ` +
		`read udp 127\.\d+\.\d+\.\d+:\d+->162\.159\.200\.1:123: i/o timeout$`)

	bootTimeout := clock.New(60).Wall(2 * time.Minute) // the patch's, at newScenario's scale

	for _, tc := range []struct {
		name  string
		patch string
		// held: the node is held until healed; else it syncs by itself.
		held     bool
		disabled bool
	}{
		{name: "no boot timeout: held until healed", held: true},
		{name: "boot timeout: synced once it passed", patch: "machine:\n  time:\n    bootTimeout: 2m\n"},
		{name: "time sync disabled", patch: "machine:\n  time:\n    disabled: true\n", disabled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := runningContext(2 * time.Minute)
			defer cancel()

			sc := newScenario(1)
			if tc.patch != "" {
				sc.Cluster.ConfigPatches = []scenario.ConfigPatch{{Patch: tc.patch}}
			}

			start := time.Now() // before the node boots
			c := simtest.FromScenario(t, sc, 1)
			node := c.Nodes()[0]
			heal := inject(t, ctx, c, chaos.TimeUnsynced{Node: "cp1"})

			// In maintenance there is no boot timeout: held.
			if err := wantSynced(ctx, insecureClient(t, ctx, node), false, false); err != nil {
				t.Fatal(err)
			}

			apply(t, ctx, node)
			cl := secure(t, ctx, c, node)

			switch {
			case tc.disabled:
				eventually(t, 10*time.Second, func() error { return wantSynced(ctx, cl, true, true) })
			case !tc.held:
				// Synced by itself, not before the boot timeout.
				eventually(t, 30*time.Second, func() error { return wantSynced(ctx, cl, true, false) })

				if since := time.Since(start); since < bootTimeout {
					t.Errorf("synced %s after boot, before its boot timeout", since)
				}
			default:
				// Bootstrap waits for CRI, then 5 s for the time sync.
				eventually(t, 30*time.Second, func() error {
					return statusIs(cl.Bootstrap(ctx, &machine.BootstrapRequest{}), codes.FailedPrecondition, "time is not in sync yet")
				})

				for _, svc := range []string{"etcd", "kubelet"} {
					eventually(t, 10*time.Second, func() error { return serviceMessage(ctx, cl, svc, "Waiting", "Waiting for time sync") })
				}

				if err := wantSynced(ctx, cl, false, false); err != nil {
					t.Error(err)
				}

				ms, err := safe.StateGetByID[*runtime.MachineStatus](ctx, cl.COSI, runtime.MachineStatusID)
				if err != nil || len(ms.TypedSpec().Status.UnmetConditions) == 0 ||
					ms.TypedSpec().Status.UnmetConditions[0] != (runtime.UnmetCondition{Name: "time", Reason: "time is not synced"}) {
					t.Errorf("machine status: %v %v", ms, err)
				}

				if _, err := cl.Time(ctx); err == nil || !ntpTimeout.MatchString(err.Error()) {
					t.Errorf("talosctl time: %v, want %s", err, ntpTimeout)
				}

				if err := heal(); err != nil {
					t.Fatal(err)
				}

				if _, err := cl.Time(ctx); err != nil {
					t.Errorf("talosctl time once healed: %v", err)
				}

				eventually(t, 10*time.Second, func() error { return wantSynced(ctx, cl, true, false) })
			}

			eventually(t, 30*time.Second, func() error { return cl.Bootstrap(ctx, &machine.BootstrapRequest{}) })
			eventually(t, 30*time.Second, func() error { return etcdHealthy(ctx, cl, true) })
		})
	}
}

// statusIs checks a call's gRPC code and message.
func statusIs(err error, code codes.Code, text string) error {
	if s, _ := status.FromError(err); err == nil || s.Code() != code || s.Message() != text {
		return fmt.Errorf("%v, want %s %q", err, code, text)
	}

	return nil
}

// wantSynced checks the node's TimeStatus (`talosctl get timestatus`).
func wantSynced(ctx context.Context, cl *client.Client, synced, disabled bool) error {
	st, err := safe.StateGetByID[*timeres.Status](ctx, cl.COSI, timeres.StatusID)
	if err != nil {
		return err
	}

	if s := st.TypedSpec(); s.Synced != synced || s.SyncDisabled != disabled {
		return fmt.Errorf("timestatus synced=%v syncDisabled=%v, want %v %v", s.Synced, s.SyncDisabled, synced, disabled)
	}

	return nil
}

// serviceMessage checks a service's state and last event.
func serviceMessage(ctx context.Context, cl *client.Client, id, state, msg string) error {
	resp, err := cl.ServiceList(ctx)
	if err != nil {
		return err
	}

	for _, s := range resp.Messages[0].Services {
		if s.Id == id {
			events := s.Events.Events
			if s.State != state || len(events) == 0 || events[len(events)-1].Msg != msg {
				return fmt.Errorf("service %s: %s %v, want %s %q", id, s.State, events, state, msg)
			}

			return nil
		}
	}

	return fmt.Errorf("no service %s", id)
}

// A node whose clock is off (clock-offset) issues its certificates from its
// clock and judges its clients' and peers' by it, so TLS to and from it
// fails with Go's own texts: a client's check of the node's API certificate
// ("x509: certificate has expired or is not yet valid: current time … is
// before …"), the node's check of the client's ("remote error: tls: expired
// certificate", crypto/tls's alert for x509.Expired), and a member's etcd
// rejecting the certificate the node joins with.
func TestClockOffset(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset chaos.ClockOffset
		// want is what the talosconfig client gets from the node.
		want *regexp.Regexp
		// peers: the first node's etcd refuses the node's certificates.
		peers bool
	}{
		{
			name:   "a year ahead: its certificates are not valid yet",
			offset: chaos.ClockOffset{Node: "cp2", Ahead: scenario.Duration{Duration: 8760 * time.Hour}},
			want: regexp.MustCompile(`^rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: ` +
				`tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time \S+ is before \S+"$`),
			peers: true,
		},
		{
			name:   "an hour behind: the client's certificate is not valid yet by its clock",
			offset: chaos.ClockOffset{Node: "cp2", Behind: scenario.Duration{Duration: time.Hour}},
			want:   regexp.MustCompile(`remote error: tls: expired certificate`),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := runningContext(2 * time.Minute)
			defer cancel()

			c := simtest.FromScenario(t, newScenario(2), 1)
			nodes := c.Nodes()
			inject(t, ctx, c, tc.offset)

			applyAndBootstrap(t, ctx, c, nodes[0].Endpoint)

			cl2 := secure(t, ctx, c, nodes[1])
			eventually(t, 30*time.Second, func() error {
				_, err := cl2.ServiceList(ctx)
				if err == nil || !tc.want.MatchString(err.Error()) {
					return fmt.Errorf("cp2: %v, want %s", err, tc.want)
				}

				return nil
			})

			if _, err := cl2.ServiceList(ctx); tc.offset.Ahead.Duration > 0 {
				now, bound, before, ok := history.CertificateTime(err.Error())
				if ahead := bound.Sub(now); !ok || !before || ahead < 8759*time.Hour || ahead > 8760*time.Hour {
					t.Errorf("cp2's certificate valid from %s, %s after the client's time (%v): want a year less the seconds since it was issued", bound, ahead, err)
				}
			}

			if !tc.peers {
				return
			}

			// cp2 joins with an etcd certificate valid from its clock: cp1's
			// etcd refuses it, by Go's check in etcd's own TLS.
			eventually(t, 30*time.Second, func() error {
				for _, l := range c.Node("cp1").Log("etcd").Lines() {
					if strings.Contains(l, "rejected connection") && strings.Contains(l, "x509: certificate has expired or is not yet valid: current time ") {
						return nil
					}
				}

				return errors.New("cp1's etcd log has no rejected connection for an expired or not yet valid certificate")
			})
		})
	}
}

// A Bootstrap whose reply is lost (api-drop-reply) has taken effect: the
// caller hits its deadline, and every retry gets Talos's AlreadyExists "etcd
// data directory is not empty" (v1alpha1_server.go Bootstrap). A Bootstrap
// the node refuses (here "time is not in sync yet": nothing done) keeps its
// answer and does not use the fault up.
func TestBootstrapReplyLost(t *testing.T) {
	ctx, cancel := runningContext(2 * time.Minute)
	defer cancel()

	c := simtest.FromScenario(t, newScenario(1), 1)
	node := c.Nodes()[0]
	unsynced := inject(t, ctx, c, chaos.TimeUnsynced{Node: "cp1"})
	heal := inject(t, ctx, c, chaos.APIDropReply{Node: "cp1", RPC: "Bootstrap", Count: 1})

	defer heal() //nolint:errcheck

	apply(t, ctx, node)
	cl := secure(t, ctx, c, node)

	bootstrap := func() error {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()

		return cl.Bootstrap(callCtx, &machine.BootstrapRequest{})
	}

	eventually(t, 30*time.Second, func() error { return statusIs(bootstrap(), codes.FailedPrecondition, "time is not in sync yet") })
	wantStatus(t, "a refused Bootstrap, again", bootstrap(), codes.FailedPrecondition, "time is not in sync yet")

	if err := unsynced(); err != nil {
		t.Fatal(err)
	}

	eventually(t, 10*time.Second, func() error { return wantSynced(ctx, cl, true, false) })
	// The reply never comes: the client's deadline ends the call. Which of
	// the two ends notices first is gRPC's race (the client's timer: "context
	// deadline exceeded"; the server's copy of the deadline resetting the
	// stream first: "stream terminated by RST_STREAM with error code:
	// CANCEL"), both DeadlineExceeded.
	if err := bootstrap(); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("the Bootstrap that takes effect: got %v, want DeadlineExceeded", err)
	}

	eventually(t, 30*time.Second, func() error { return statusIs(bootstrap(), codes.AlreadyExists, "etcd data directory is not empty") })
	eventually(t, 30*time.Second, func() error { return etcdHealthy(ctx, cl, true) })
}
