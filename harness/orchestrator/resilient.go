package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
)

// Resilient is a careful bootstrap: preflight every node, apply per node with
// exponential backoff (stop on InvalidArgument; after an ambiguous failure check
// whether the node already left maintenance before retrying), verify every node
// left maintenance, bootstrap exactly one node once, wait for every control plane
// to be a voter, then for etcd to be healthy everywhere. While it waits it
// mends what it finds: stale and unpromotable learners, Failed and
// crash-looping etcd services, and nodes back in maintenance.
type Resilient struct{}

// Name implements Orchestrator.
func (*Resilient) Name() string { return "resilient" }

// ErrConfigInvalid stops the run: retrying an invalid config cannot help.
var ErrConfigInvalid = errors.New("configuration rejected as invalid")

// invalidConfig stops a wait on the node's refusal of its configuration.
func invalidConfig(n target.Node, err error) error {
	return stop(fmt.Errorf("%w: %s: %s", ErrConfigInvalid, n.Name, status.Convert(err).Message()))
}

// Run implements Orchestrator: the bootstrap, then the rolling upgrade the
// scenario asks for.
func (r *Resilient) Run(ctx context.Context, env *Env) error {
	return env.rollingUpgrade(ctx, r.bootstrapAll(ctx, env), func(ctx context.Context, image, version string) error {
		return r.upgrade(ctx, env, image, version)
	})
}

func (r *Resilient) bootstrapAll(ctx context.Context, env *Env) error {
	env.step("preflight: wait for every node's API")

	configured := map[string]bool{}

	for _, n := range env.Nodes {
		done, err := r.preflight(ctx, env, n)
		if err != nil {
			return err
		}

		configured[n.Name] = done
	}

	env.step("apply the machine configuration to every node in maintenance")

	for _, n := range env.Nodes {
		if configured[n.Name] {
			env.Log.Add(n.Name, "orchestrator.skip", n.Name+" already left maintenance")

			continue
		}

		if err := r.apply(ctx, env, n); err != nil {
			return err
		}
	}

	env.step("verify every node left maintenance")

	for _, n := range env.Nodes {
		if err := r.waitConfigured(ctx, env, n, n.Name != env.BootstrapNode, nil); err != nil {
			return err
		}
	}

	boot, ok := env.node(env.BootstrapNode)
	if !ok {
		return fmt.Errorf("bootstrap node %q is not in the cluster", env.BootstrapNode)
	}

	env.step("bootstrap etcd on " + boot.Name)

	if err := r.bootstrap(ctx, env, boot); err != nil {
		return err
	}

	// reapplied: when each node found back in maintenance got its
	// configuration again (reconfigure).
	reapplied := map[string]time.Time{}

	env.step("wait for every control plane to be an etcd voter")

	if err := r.waitVoters(ctx, env, boot, reapplied); err != nil {
		return err
	}

	env.step("wait for etcd to be healthy on every control plane")

	if err := r.waitHealthy(ctx, env, reapplied); err != nil {
		return err
	}

	// The waits looked at the control planes; a worker reset meanwhile
	// (talosctl reset, a wiped disk) is back in maintenance.
	if workers := env.workers(); len(workers) > 0 {
		env.step("verify every worker is still out of maintenance")

		for _, n := range workers {
			if err := r.waitConfigured(ctx, env, n, true, reapplied); err != nil {
				return err
			}
		}
	}

	if !env.Kubernetes {
		return nil
	}

	// Any control plane serves the kubeconfig; the bootstrap node first.
	from := []target.Node{boot}
	for _, n := range env.controlPlanes() {
		if n.Name != boot.Name {
			from = append(from, n)
		}
	}

	return waitKubernetesEndpoints(ctx, env, from, 5*time.Second, true)
}

// preflight waits until the node answers; it reports whether the node already
// has a config (the insecure client is refused with "certificate required" and
// the talosconfig client works).
func (r *Resilient) preflight(ctx context.Context, env *Env, n target.Node) (bool, error) {
	ins, err := env.insecure(ctx, n)
	if err != nil {
		return false, err
	}
	defer ins.Close() //nolint:errcheck

	sec, err := env.secure(ctx, n)
	if err != nil {
		return false, err
	}
	defer sec.Close() //nolint:errcheck

	configured := false

	err = env.wait(ctx, condition{what: n.Name + "'s API to answer", every: 2 * time.Second, check: func(ctx context.Context, _ int) error {
		callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
		defer cancel()

		_, err := ins.Disks(callCtx)
		if err == nil {
			env.call(n.Name, "Disks (insecure preflight)", nil)

			return nil
		}

		if strings.Contains(err.Error(), "tls: certificate required") {
			if _, serr := sec.Version(callCtx); serr == nil {
				configured = true

				return nil
			}
		}

		return err
	}})

	return configured, err
}

// apply sends the config with exponential backoff.
func (r *Resilient) apply(ctx context.Context, env *Env, n target.Node) error {
	return env.wait(ctx, condition{what: n.Name + " to take its configuration", every: time.Second, backoff: 30 * time.Second,
		check: func(ctx context.Context, _ int) error {
			err := r.applyOnce(ctx, env, n)
			if err == nil {
				return nil
			}

			if status.Code(err) == codes.InvalidArgument {
				return invalidConfig(n, err)
			}

			// Ambiguous failure: the config may have been applied, and the
			// node then leaves maintenance within seconds. Watch for that
			// before sending the config again (a resend through the
			// insecure client would only be told "tls: certificate
			// required").
			if r.leavesMaintenance(ctx, env, n) {
				env.Log.Add(n.Name, "orchestrator.recovered", n.Name+" left maintenance although the apply call failed: treating it as applied")

				return nil
			}

			return err
		}})
}

func (r *Resilient) applyOnce(ctx context.Context, env *Env, n target.Node) error {
	ins, err := env.insecure(ctx, n)
	if err != nil {
		return err
	}
	defer ins.Close() //nolint:errcheck

	callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
	defer cancel()

	_, err = ins.ApplyConfiguration(callCtx, &machine.ApplyConfigurationRequest{Data: n.Config, Mode: machine.ApplyConfigurationRequest_AUTO})
	env.call(n.Name, "ApplyConfiguration", err)

	return err
}

// leavesMaintenance watches, for a few seconds of Talos time, whether the node
// switches to mutual TLS after an apply whose outcome is unknown.
func (r *Resilient) leavesMaintenance(ctx context.Context, env *Env, n target.Node) bool {
	return env.wait(ctx, condition{what: n.Name + " to leave maintenance", every: time.Second, within: 10 * time.Second,
		check: func(ctx context.Context, _ int) error {
			_, err := r.leftMaintenance(ctx, env, n)

			return err
		}}) == nil
}

// leftMaintenance asks the node with the talosconfig client.
func (r *Resilient) leftMaintenance(ctx context.Context, env *Env, n target.Node) (bool, error) {
	sec, err := env.secure(ctx, n)
	if err != nil {
		return false, err
	}
	defer sec.Close() //nolint:errcheck

	callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
	defer cancel()

	_, err = sec.Version(callCtx)

	return err == nil, err
}

// silentAfter is how long (Talos time) the resilient orchestrator waits for a
// node that took its configuration and then stopped answering at all (powered
// off, cut off) before it goes on without it: the bootstrap needs only the
// bootstrap node, and the silent node joins etcd on its own once it is back,
// which the wait for voters sees.
const silentAfter = time.Minute

// transientFor is how long the talosconfig client may fail the expected way
// on a node leaving maintenance before it is shown (Talos time).
const transientFor = time.Minute

// waitConfigured polls until the node answers the talosconfig client. Every
// node that gets here took its configuration; when mayGoSilent, one that stops
// answering at all is not waited for past silentAfter. A node that answers, in
// maintenance or with other secrets, is waited for; with reapplied, one back
// in maintenance gets its configuration again (reconfigure).
func (r *Resilient) waitConfigured(ctx context.Context, env *Env, n target.Node, mayGoSilent bool, reapplied map[string]time.Time) error {
	var (
		last   error
		silent time.Time
		// The talosconfig client fails while the node is still in
		// maintenance (its certificate is not the cluster CA's: "x509:
		// certificate signed by unknown authority") and while its API
		// restarts with mutual TLS (no connection): expected on the way, so
		// recorded (every call is in the history) but only shown once it
		// has lasted transientFor.
		waiting  = time.Now()
		reported bool
	)

	return env.wait(ctx, condition{what: n.Name + " to leave maintenance", every: 2 * time.Second, check: func(ctx context.Context, _ int) error {
		left, err := r.leftMaintenance(ctx, env, n)
		if left {
			env.call(n.Name, "Version (left maintenance)", nil)

			return nil
		}

		switch class := history.Classify(err); {
		case class != history.FailureUnknownAuthority && class != history.FailureNoConnection:
			if !sameError(err, last) {
				env.call(n.Name, "Version (left maintenance?)", err)
			}
		case !reported && time.Since(waiting) > env.d(transientFor):
			reported = true

			env.call(n.Name, fmt.Sprintf("Version (still in maintenance after %s?)", transientFor), err)
		}

		last = err

		if reapplied != nil {
			if rerr := r.reconfigure(ctx, env, n, err, reapplied); rerr != nil {
				return rerr
			}
		}

		switch {
		case !mayGoSilent || talosclient.Answers(ctx, n.Endpoint):
			silent = time.Time{}
		case silent.IsZero():
			silent = time.Now()
		case time.Since(silent) > env.d(silentAfter):
			env.Log.Add(n.Name, "orchestrator.skip", fmt.Sprintf("%s took its configuration and has not answered for %s: going on without it (it joins etcd on its own once it is back)",
				n.Name, silentAfter))

			return nil
		}

		return err
	}})
}

// portRE matches the ephemeral ports of connection errors ("127.0.0.1:44852->").
var portRE = regexp.MustCompile(`:\d+->`)

// sameError reports whether two call errors say the same thing, whatever
// ephemeral port each connection had: a node that keeps failing the same way
// is logged once.
func sameError(a, b error) bool {
	return portRE.ReplaceAllString(errText(a), ":*->") == portRE.ReplaceAllString(errText(b), ":*->")
}

// bootstrap calls Bootstrap on one node until it is accepted; AlreadyExists
// means an earlier call whose reply was lost already did it.
func (r *Resilient) bootstrap(ctx context.Context, env *Env, n target.Node) error {
	sec, err := env.secure(ctx, n)
	if err != nil {
		return err
	}
	defer sec.Close() //nolint:errcheck

	// unanswered: a Bootstrap got no answer and may have taken effect.
	unanswered := false

	// A node that just left maintenance refuses Bootstrap with
	// FailedPrecondition "bootstrap is not available yet" until its CRI is up
	// (v1alpha1_server.go Bootstrap, IsBootstrapAllowed), or "time is not in
	// sync yet" until its time syncs: the wait is expected, told as the
	// condition's state (the call is in the history all the same), not as
	// an error.
	return env.wait(ctx, condition{what: n.Name + " to accept Bootstrap", node: n.Name, log: true, every: 5 * time.Second, check: func(ctx context.Context, _ int) error {
		callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
		err := sec.Bootstrap(callCtx, &machine.BootstrapRequest{})

		cancel()

		if status.Code(err) != codes.FailedPrecondition {
			env.call(n.Name, "Bootstrap", err)
		}

		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.AlreadyExists:
			return r.alreadyBootstrapped(ctx, env, n, unanswered)
		case codes.InvalidArgument, codes.Unimplemented, codes.PermissionDenied:
			return stop(fmt.Errorf("bootstrap %s: %w", n.Name, err))
		case codes.FailedPrecondition:
			return fmt.Errorf("Bootstrap %s: %s", n.Name, status.Convert(err).Message())
		}

		unanswered = unanswered || history.Classify(err).MayHaveActed()

		return err
	}})
}

// Learners the resilient orchestrator stops waiting for (Talos time).
const (
	// staleAfter: Talos starts etcd seconds after adding its learner; an unnamed
	// learner older than this will never start (its node crashed, was wiped, or
	// lost the add reply) and blocks every later join.
	staleAfter = 2 * time.Minute
	// stuckAfter: past the 10-minute promote window a learner is never promoted.
	stuckAfter = 11 * time.Minute
	// rejoinAfter: a node rebooted or reset by a remedy is left alone this
	// long (Talos time) to come back and join before it is judged again.
	rejoinAfter = 5 * time.Minute
	// crashRestarts: this many restarts of etcd by restart.Forever within
	// crashWindow make a crash loop worth wiping the node's etcd data for,
	// not a hiccup (restarts come every 5 s). Two more than the judge's
	// etcd-crash-loop diagnosis needs: a destructive remedy waits ten Talos
	// seconds longer to be sure.
	crashRestarts = 5
	crashWindow   = 2 * time.Minute
)

// waitVoters polls the member list until every control plane is a voting
// member, removing stale learners and re-joining nodes whose learner can no
// longer be promoted.
func (r *Resilient) waitVoters(ctx context.Context, env *Env, boot target.Node, reapplied map[string]time.Time) error {
	sec, err := env.secure(ctx, boot)
	if err != nil {
		return err
	}
	defer sec.Close() //nolint:errcheck

	learnerSince := map[uint64]time.Time{}
	handled := map[uint64]bool{}
	remedied := map[string]time.Time{}

	return env.wait(ctx, condition{what: "every control plane to be an etcd voter", node: boot.Name, log: true, every: 5 * time.Second, check: func(ctx context.Context, _ int) error {
		callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
		resp, err := sec.EtcdMemberList(callCtx, &machine.EtcdMemberListRequest{})

		cancel()

		if err != nil {
			return err
		}

		var voters, learners []string

		members := resp.GetMessages()[0].GetMembers()

		for _, m := range members {
			name := m.GetHostname()
			if name == "" {
				name = "(unstarted)"
			}

			if !m.GetIsLearner() {
				voters = append(voters, name)

				continue
			}

			learners = append(learners, name)

			if _, ok := learnerSince[m.GetId()]; !ok {
				learnerSince[m.GetId()] = time.Now()
			}

			if !handled[m.GetId()] {
				done, err := r.unblock(ctx, env, sec, m, time.Since(learnerSince[m.GetId()]))
				if err != nil {
					return stop(err)
				}

				handled[m.GetId()] = done
			}
		}

		var missing []string

		for _, n := range env.controlPlanes() {
			if m := memberOf(members, n); m == nil || m.GetIsLearner() {
				missing = append(missing, n.Name)
			}
		}

		if len(missing) == 0 {
			env.Log.Add(boot.Name, "orchestrator.voters", "all control planes are voters: "+strings.Join(voters, ", "))

			return nil
		}

		for _, name := range missing {
			if err := r.restartStuck(ctx, env, sec, members, name, remedied, reapplied); err != nil {
				return stop(err)
			}
		}

		return fmt.Errorf("voters [%s] learners [%s] waiting for [%s]", strings.Join(voters, " "), strings.Join(learners, " "), strings.Join(missing, " "))
	}})
}

// Remedies implements Remedial.
func (*Resilient) Remedies() []Remedy {
	return []Remedy{{
		When: fmt.Sprintf("an etcd learner that never started (unnamed) is still in the member list after %s of Talos time "+
			"and its node does not run etcd: it blocks every later join", staleAfter),
		Action:  "remove the stale learner; its node's join loop adds itself again",
		Command: "talosctl -n <bootstrap node> etcd remove-member <member id>",
	}, {
		When:   fmt.Sprintf("a learner is still not promoted %s after it joined: Talos's 10-minute promote window is over and nothing retries", stuckAfter),
		Action: "remove it and wipe its node's EPHEMERAL partition, so the node reboots and joins afresh",
		Command: "talosctl -n <bootstrap node> etcd remove-member <member id> && " +
			"talosctl -n <learner's node> reset --system-labels-to-wipe EPHEMERAL --reboot --graceful=false",
	}, {
		When: "a control plane is not a voter and its etcd service is Failed (its join loop gave up after 30 minutes, or its pre stage failed): " +
			"Talos starts etcd again only on the next boot, 70 minutes in when the boot times out",
		Action:  "reboot the node; its join runs again",
		Command: "talosctl -n <node> reboot",
	}, {
		When: fmt.Sprintf("a control plane is not a voter and its etcd has been restarted %d times within %s (crash loop: its data disagrees with the cluster)",
			crashRestarts, crashWindow),
		Action: "remove its member if listed, wipe its EPHEMERAL partition and reboot it, so it joins afresh",
		Command: "talosctl -n <bootstrap node> etcd remove-member <member id> && " +
			"talosctl -n <node> reset --system-labels-to-wipe EPHEMERAL --reboot --graceful=false",
	}}
}

// unblock deals with a learner that is in the way; it reports whether it acted,
// and an error when it needed a remedy it may not take.
//   - unnamed (never started) for longer than staleAfter, and its node does not
//     run etcd: remove it; its node's join loop adds itself again.
//   - named, a learner for longer than stuckAfter: its promote window is over.
//     Remove it and wipe its node's EPHEMERAL partition (etcd data, config kept),
//     so the node reboots and joins afresh with a new promote window.
func (r *Resilient) unblock(ctx context.Context, env *Env, sec *client.Client, m *machine.EtcdMember, age time.Duration) (bool, error) {
	id := fmt.Sprintf("%016x", m.GetId())

	boot := env.BootstrapNode
	if n, ok := env.node(boot); ok {
		boot = n.Address
	}

	switch {
	case m.GetHostname() == "" && age > env.d(staleAfter):
		if r.runsEtcd(ctx, env, m) {
			return false, nil
		}

		what := "remove stale learner " + id + " (" + strings.Join(m.GetPeerUrls(), ",") + ")"
		if !env.Destructive {
			return false, env.withhold(env.BootstrapNode, what, fmt.Sprintf("talosctl -n %s etcd remove-member %s", boot, id))
		}

		err := r.removeMember(ctx, env, sec, m)
		env.call(env.BootstrapNode, "EtcdRemoveMemberByID "+id+" (stale learner "+strings.Join(m.GetPeerUrls(), ",")+")", err)

		return err == nil, nil
	case m.GetHostname() != "" && age > env.d(stuckAfter):
		node, ok := env.nodeOf(m)
		if !ok {
			return false, nil
		}

		if !env.Destructive {
			return false, env.withhold(node.Name, "remove learner "+node.Name+" ("+id+"), past its promote window, and reset its node to re-join",
				fmt.Sprintf("talosctl -n %s etcd remove-member %s && talosctl -n %s reset --system-labels-to-wipe EPHEMERAL --reboot --graceful=false",
					boot, id, node.Address))
		}

		err := r.removeMember(ctx, env, sec, m)
		env.call(env.BootstrapNode, "EtcdRemoveMemberByID "+id+" (learner "+node.Name+" past its promote window)", err)

		if err != nil {
			return false, nil
		}

		nc, err := env.secure(ctx, node)
		if err != nil {
			return false, nil
		}
		defer nc.Close() //nolint:errcheck

		callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
		defer cancel()

		_, err = nc.ResetGenericWithResponse(callCtx, &machine.ResetRequest{
			Graceful:               false,
			Reboot:                 true,
			SystemPartitionsToWipe: []*machine.ResetPartitionSpec{{Label: "EPHEMERAL", Wipe: true}},
		})
		env.call(node.Name, "Reset (wipe EPHEMERAL, reboot, re-join)", err)

		return true, nil
	}

	return false, nil
}

// restartStuck deals with a control plane that is not a voter and whose
// etcd service will not make it one by itself, whatever the cluster's size:
//   - Failed: the join loop gave up (30 minutes) or the pre stage failed.
//     Talos starts etcd again only on the next boot (ServiceRestart of a
//     stopped etcd is an APIStart, which etcd does not allow:
//     internal/app/machined/pkg/system/system.go APIRestart), or 70 minutes
//     into the boot when the boot times out. Reboot the node: its join runs
//     again.
//   - crash-looping: restart.Forever has restarted etcd crashRestarts times
//     ("going to restart forever"): its data directory disagrees with the
//     cluster (a removed member, a member list of another size). Remove its
//     member if the cluster still lists it, wipe EPHEMERAL and reboot, so it
//     joins afresh.
//
// A node is remedied at most once per rejoinAfter: a rebooted node takes
// that long to come back and join.
func (r *Resilient) restartStuck(ctx context.Context, env *Env, sec *client.Client, members []*machine.EtcdMember, name string, remedied, reapplied map[string]time.Time) error {
	node, ok := env.node(name)
	if !ok || time.Since(remedied[name]) < env.d(rejoinAfter) {
		return nil
	}

	nc, err := env.secure(ctx, node)
	if err != nil {
		return nil //nolint:nilerr // down (rebooting): nothing to do yet
	}
	defer nc.Close() //nolint:errcheck

	svc, err := r.etcdService(ctx, env, nc)
	if err != nil {
		// Not answering: nothing to decide on, unless it is in
		// maintenance again.
		return r.reconfigure(ctx, env, node, err, reapplied)
	}

	// Restarts within crashWindow of the service's last event (the node's
	// own clock), while it is not healthy: a loop going on now, not crashes
	// a fault caused long ago.
	evs := svc.GetEvents().GetEvents()
	crashes, last := 0, ""

	if len(evs) > 0 && !svc.GetHealth().GetHealthy() {
		newest := evs[len(evs)-1].GetTs().AsTime()
		last = evs[len(evs)-1].GetMsg()

		for _, e := range evs {
			if strings.Contains(e.GetMsg(), history.RestartForever) && newest.Sub(e.GetTs().AsTime()) <= env.d(crashWindow) {
				crashes++
			}
		}
	}

	switch {
	case svc.GetState() == "Failed" && !history.FailedByStop(last):
		what := fmt.Sprintf("reboot %s: its etcd service is Failed (%s) and Talos starts it again only on the next boot", name, last)
		if !env.Destructive {
			return env.withhold(name, what, "talosctl -n "+node.Address+" reboot")
		}

		remedied[name] = time.Now()

		callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
		defer cancel()

		env.Log.Add(name, "orchestrator.remedy", what)
		env.call(name, "Reboot (etcd Failed: join again)", nc.Reboot(callCtx))
	case crashes >= crashRestarts:
		what := fmt.Sprintf("wipe %s's etcd data and reboot it: etcd crashed %d times (%s)", name, crashes, last)

		boot := env.BootstrapNode
		if n, ok := env.node(boot); ok {
			boot = n.Address
		}

		member := memberOf(members, node)

		command := "talosctl -n " + node.Address + " reset --system-labels-to-wipe EPHEMERAL --reboot --graceful=false"
		if member != nil {
			command = fmt.Sprintf("talosctl -n %s etcd remove-member %016x && %s", boot, member.GetId(), command)
		}

		if !env.Destructive {
			return env.withhold(name, what, command)
		}

		remedied[name] = time.Now()

		env.Log.Add(name, "orchestrator.remedy", what)

		if member != nil {
			err := r.removeMember(ctx, env, sec, member)
			env.call(env.BootstrapNode, fmt.Sprintf("EtcdRemoveMemberByID %016x (%s, crash-looping)", member.GetId(), name), err)
		}

		callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
		defer cancel()

		_, err := nc.ResetGenericWithResponse(callCtx, &machine.ResetRequest{
			Graceful:               false,
			Reboot:                 true,
			SystemPartitionsToWipe: []*machine.ResetPartitionSpec{{Label: "EPHEMERAL", Wipe: true}},
		})
		env.call(name, "Reset (wipe EPHEMERAL, reboot, re-join: etcd crash-looping)", err)
	}

	return nil
}

// reapplyEvery is how long (Talos time) the resilient orchestrator leaves a
// node it gave its configuration again before it tries again: leaving
// maintenance takes seconds.
const reapplyEvery = time.Minute

// reconfigure gives a node its configuration again when it is back in
// maintenance: it took its configuration, and now the talosconfig client
// does not trust it (err: the maintenance API's own certificate) while the
// insecure client is answered. A node reset (talosctl reset, its STATE
// wiped) or reinstalled comes back so and would stay so: applying a
// configuration to a node in maintenance is the bootstrap's own first step,
// nothing is destroyed. Its etcd then joins afresh (Talos removes a member
// of its own name first). A node that answers neither way, or refuses the
// insecure client ("certificate required": configured, but with another CA,
// as in a regenerated talosconfig) is left alone. An invalid configuration
// stops the run, as at the first apply.
func (r *Resilient) reconfigure(ctx context.Context, env *Env, n target.Node, err error, reapplied map[string]time.Time) error {
	if history.Classify(err) != history.FailureUnknownAuthority || time.Since(reapplied[n.Name]) < env.d(reapplyEvery) {
		return nil
	}

	ins, ierr := env.insecure(ctx, n)
	if ierr != nil {
		return nil //nolint:nilerr // no client: not known to be in maintenance
	}
	defer ins.Close() //nolint:errcheck

	callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
	_, derr := ins.Disks(callCtx)

	cancel()

	if derr != nil {
		return nil //nolint:nilerr // not in maintenance (or not answering): nothing to apply
	}

	reapplied[n.Name] = time.Now()

	env.Log.Add(n.Name, "orchestrator.remedy", n.Name+" is in maintenance again (reset, or its disks wiped): applying its configuration again")

	if err := r.applyOnce(ctx, env, n); status.Code(err) == codes.InvalidArgument {
		return invalidConfig(n, err)
	}

	return nil
}

// memberOf is the node's member in the list: one with a peer URL on one of
// its addresses, else the one named as its hostname (history.Cluster.Member).
func memberOf(members []*machine.EtcdMember, n target.Node) *machine.EtcdMember {
	m, ok := history.Cluster{Members: history.APIMembers(members)}.MemberOfTarget(n)
	if !ok {
		return nil
	}

	for _, am := range members {
		if am.GetId() == m.ID {
			return am
		}
	}

	return nil
}

// runsEtcd reports whether the node that advertises the learner's peer URL
// says its etcd service is Running. A learner stays unnamed until it has
// published itself through raft, which needs a leader: while the leader is
// down, a started learner looks exactly like a stale one, and removing it
// would kill a member about to join (its etcd exits and Talos restarts it
// with the same arguments forever).
func (r *Resilient) runsEtcd(ctx context.Context, env *Env, m *machine.EtcdMember) bool {
	node, ok := env.nodeByPeerURL(m.GetPeerUrls())
	if !ok {
		return false
	}

	nc, err := env.secure(ctx, node)
	if err != nil {
		return false
	}
	defer nc.Close() //nolint:errcheck

	s, err := r.etcdService(ctx, env, nc)

	return err == nil && s.GetState() == "Running"
}

// etcdService reads the node's etcd service from ServiceList.
func (r *Resilient) etcdService(ctx context.Context, env *Env, nc *client.Client) (*machine.ServiceInfo, error) {
	callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
	defer cancel()

	resp, err := nc.ServiceList(callCtx)
	if err != nil {
		return nil, err
	}

	for _, s := range resp.GetMessages()[0].GetServices() {
		if s.GetId() == "etcd" {
			return s, nil
		}
	}

	return nil, errors.New("no etcd service")
}

func (r *Resilient) removeMember(ctx context.Context, env *Env, sec *client.Client, m *machine.EtcdMember) error {
	callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
	defer cancel()

	return sec.EtcdRemoveMemberByID(callCtx, &machine.EtcdRemoveMemberByIDRequest{MemberId: m.GetId()})
}

// waitHealthy polls ServiceList until etcd is Running and healthy on every
// control plane, looking at every one of them each time, as Talos's
// ServiceHealthAssertion does (pkg/cluster/check/service.go), with its
// texts.
func (r *Resilient) waitHealthy(ctx context.Context, env *Env, reapplied map[string]time.Time) error {
	cps := env.controlPlanes()
	clients := make([]*client.Client, 0, len(cps))

	defer func() {
		for _, c := range clients {
			c.Close() //nolint:errcheck
		}
	}()

	for _, n := range cps {
		sec, err := env.secure(ctx, n)
		if err != nil {
			return err
		}

		clients = append(clients, sec)
	}

	err := env.wait(ctx, condition{what: "etcd to be healthy on every control plane", every: 5 * time.Second, check: func(ctx context.Context, _ int) error {
		var errs []error

		for i, n := range cps {
			s, err := r.etcdService(ctx, env, clients[i])

			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))

				if rerr := r.reconfigure(ctx, env, n, err, reapplied); rerr != nil {
					return rerr
				}
			case s.GetState() != "Running":
				msg := ""
				if evs := s.GetEvents().GetEvents(); len(evs) > 0 {
					msg = evs[len(evs)-1].GetMsg()
				}

				errs = append(errs, fmt.Errorf("%s: service %q not in expected state %q: current state [%s] %s", n.Name, "etcd", "Running", s.GetState(), msg))
			case !s.GetHealth().GetHealthy():
				errs = append(errs, fmt.Errorf("%s: service is not healthy: %s", n.Name, "etcd"))
			}
		}

		return errors.Join(errs...)
	}})
	if err != nil {
		return err
	}

	env.Log.Add("", "orchestrator.done", "etcd is healthy on every control plane")

	return nil
}
