package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// This file is Talos's etcd service (internal/app/machined/pkg/system/services/etcd.go
// at v1.12): the pre stage that decides between starting from the WAL, a new
// cluster and the join loop; the restart-forever runner; the promote loop; the
// health check. TALOS-FIDELITY.md §1.

// etcdRun is one run of the etcd service, from "Starting service" to its end.
type etcdRun struct {
	svc       *service
	bootstrap bool
	cancel    context.CancelFunc
	done      chan struct{}
}

// startEtcdService loads and starts a new etcd service runner (system.Services().Load+Start).
func (n *Node) startEtcdService(bootstrap bool) *etcdRun {
	ctx, cancel := context.WithCancel(n.bootCtx)

	run := &etcdRun{
		svc:       newService("etcd", n.machined.Printf, n.refreshStatus),
		bootstrap: bootstrap,
		cancel:    cancel,
		done:      make(chan struct{}),
	}

	n.mu.Lock()
	n.etcdRun = run
	n.mu.Unlock()

	n.goBoot(func() {
		defer close(run.done)

		err := n.etcdMain(ctx, run)

		// system.go Start: a run that returned an error fails with it, a
		// stop in the conditions or the pre stage included.
		if err == nil {
			run.svc.update(stateFinished, "Service finished successfully")
		} else {
			run.svc.update(stateFailed, "%s", failedMessage(err))
		}
	})

	return run
}

// stop stops the service and waits for it (system.Services().Stop).
func (r *etcdRun) stop() {
	r.cancel()
	<-r.done
}

func (n *Node) etcdMain(ctx context.Context, run *etcdRun) error {
	svc := run.svc

	svc.update(stateStarting, "Starting service")

	// Without an etcd spec (no address of the node's in
	// cluster.etcd.advertisedSubnets, or none to listen on), the wait ends
	// at the spec and stays there, with no error: nothing writes the spec.
	// Time that never syncs holds it the same way.
	unmet := func() []string {
		var held []string

		if !n.timeSynced(ctx) {
			held = append(held, condTimeSync)
		}

		if _, ok := n.etcdSpec(); !ok {
			held = append(held, condEtcdSpec)
		}

		return held
	}

	if !n.waitConditions(ctx, svc, etcdWaits, unmet) {
		// ServiceRunner.Run: the condition's Wait ends with the stop's
		// cancellation (conditions.WaitForAll collapses to it).
		return fmt.Errorf("condition failed: %w", context.Canceled)
	}

	svc.update(statePreparing, "Running pre state")

	if err := n.issueEtcdCerts(); err != nil {
		return fmt.Errorf("failed to run pre stage: %w", err)
	}

	// PreFunc: pull the image, then decide how etcd starts. A stop cancels
	// PreFunc's context: the service fails with what PreFunc returned
	// (service_runner.go Run), it does not finish.
	if !n.sleep(ctx, n.c.clock.Wall(n.override.EtcdImagePull.Duration)) {
		return fmt.Errorf("failed to run pre stage: failed to pull image %q: %w", n.c.profile.EtcdImage, context.Canceled)
	}

	args, err := n.etcdArgs(ctx, run.bootstrap)
	if err != nil {
		return fmt.Errorf("failed to run pre stage: %w", err)
	}

	svc.update(statePreparing, "Creating service runner")

	// Runner(): a learner added during the pre stage gets its promote loop; PostFunc cancels it.
	if args.learnerID != 0 {
		promoteCtx, promoteCancel := context.WithCancel(n.bootCtx)
		defer promoteCancel()

		n.goBoot(func() { n.promoteLoop(promoteCtx, args.learnerID, args.voterClientURLs) })
	}

	healthCtx, healthCancel := context.WithCancel(ctx)
	defer healthCancel()

	// svcrunner.run starts health.Run, whose first act is Init ("Unknown"),
	// as it starts the task: the health is Unknown, not blank, once Running.
	svc.initHealth()
	n.goBoot(func() { n.healthLoop(healthCtx, svc) })

	// restart.Forever around the container runner.
	for {
		if !n.sleep(ctx, n.c.clock.Wall(n.override.EtcdStartDelay.Duration)) {
			return nil
		}

		err := n.runEtcdOnce(ctx, svc, args)
		if ctx.Err() != nil {
			return nil
		}

		svc.update(stateWaiting, "Error running Containerd(etcd), going to restart forever: %s", err)

		if !n.sleep(ctx, n.c.clock.Wall(n.c.profile.RestartInterval)) {
			svc.update(stateStopping, "Aborting restart sequence")

			return nil
		}
	}
}

// The conditions a service waits for (conditions.WaitForAll's String lists
// the unmet ones, in order).
const (
	condCRI      = `service "cri" to be "up"`
	condTimeSync = "time sync"
	condNetwork  = "network"
	condEtcdSpec = "etcd spec"
)

// etcdWaits is what etcd's service waits for before its pre stage, in the
// order the conditions are met: ServiceRunner.Run puts the volume mounts
// ("/var/lib", then constants.EtcdDataVolumeID, mounted one by one) before
// the dependency on "cri" and the service's own Condition (time sync,
// network, etcd spec; services/etcd.go Condition, Volumes, DependsOn); each
// condition leaves the description once met. The first step lists every
// condition in order.
var etcdWaits = [][]string{
	{"volumes /var/lib, ETCD to be mounted", condCRI, condTimeSync, condNetwork, condEtcdSpec},
	{"volumes ETCD to be mounted", condCRI, condTimeSync, condNetwork, condEtcdSpec},
	{condCRI, condEtcdSpec},
	{condCRI},
}

// kubeletWaits is kubelet's (services/kubelet.go Volumes, Condition).
var kubeletWaits = [][]string{
	{"volumes /var/lib, /var/lib/kubelet, /var/log, /var/log/audit, /var/log/containers, /var/log/pods, /var/lib/kubelet/seccomp, /var/lib/kubelet/seccomp/profiles, /var/log/audit/kube, /var/mnt to be mounted", condCRI, condTimeSync, condNetwork},
	{"volumes /var/mnt to be mounted", condCRI, condTimeSync, condNetwork},
	{condCRI},
	{condCRI},
}

// waitConditions is ServiceRunner.waitFor: "Waiting for <description>", then
// a new Waiting event each time the description changed, checked once a
// second (WaitConditionCheckInterval). The steps take the profile's
// ServiceWait; a condition unmet() still holds stays in every step's
// description and, after the last, holds the service, checked once a
// second, until it is met. It reports false when the service was stopped
// meanwhile.
func (n *Node) waitConditions(ctx context.Context, svc *service, steps [][]string, unmet func() []string) bool {
	step := n.c.clock.Wall(n.c.profile.ServiceWait) / time.Duration(len(steps))
	last := ""

	describe := func(conds []string) {
		if desc := strings.Join(conds, ", "); desc != last && desc != "" {
			svc.update(stateWaiting, "Waiting for %s", desc)
			last = desc
		}
	}

	for _, s := range steps {
		describe(withHeld(steps[0], s, unmet()))

		if !n.sleep(ctx, step) {
			return false
		}
	}

	for {
		held := unmet()
		if len(held) == 0 {
			return true
		}

		describe(held)

		if !n.sleep(ctx, n.c.clock.WallAtLeast(time.Second, 50*time.Millisecond)) {
			return false
		}
	}
}

// withHeld is a step's description with the held conditions kept in it:
// what only the step has (its volumes) first, then, in all's order, the
// conditions the step or held name.
func withHeld(all, step, held []string) []string {
	var out []string

	for _, c := range step {
		if !slices.Contains(all, c) {
			out = append(out, c)
		}
	}

	for _, c := range all {
		if slices.Contains(step, c) || slices.Contains(held, c) {
			out = append(out, c)
		}
	}

	return out
}

// etcdStartArgs are the flags Talos computed for etcd in the pre stage.
type etcdStartArgs struct {
	initialCluster  string
	clusterState    string
	learnerID       uint64
	voterClientURLs []string
}

// etcdArgs is argsForControlPlane: only an empty data directory needs cluster
// arguments; a non-empty one starts from the WAL with no join and no promotion.
func (n *Node) etcdArgs(ctx context.Context, bootstrap bool) (etcdStartArgs, error) {
	// formatClusterURLs: the node's name with each of its peer URLs.
	var urls []string
	for _, u := range n.peerURLs() {
		urls = append(urls, n.Hostname()+"="+u)
	}

	self := strings.Join(urls, ",")

	switch {
	case !n.EtcdDataDirEmpty():
		return etcdStartArgs{initialCluster: self, clusterState: embed.ClusterStateFlagExisting}, nil
	case bootstrap:
		return etcdStartArgs{initialCluster: self, clusterState: embed.ClusterStateFlagNew}, nil
	}

	args, err := n.buildInitialCluster(ctx)
	if err != nil {
		return args, fmt.Errorf("failed to build initial etcd cluster: %w", err)
	}

	args.clusterState = embed.ClusterStateFlagExisting

	return args, nil
}

// buildInitialCluster is the join loop: every 3 s (+≤1 s jitter) for 30 min,
// each attempt bounded to 30 s.
func (n *Node) buildInitialCluster(ctx context.Context) (etcdStartArgs, error) {
	var (
		args    etcdStartArgs
		lastNag time.Time
	)

	p := n.c.profile

	err := retryLoop{
		total:    n.c.clock.Wall(p.JoinTimeout),
		interval: n.c.clock.Wall(p.JoinInterval),
		jitter:   n.c.clock.Wall(p.JoinJitter),
		logf:     n.machined.Printf,
		rng:      n.rng("join"),
	}.run(ctx, func(ctx context.Context) error {
		if time.Since(lastNag) > n.c.clock.Wall(p.JoinNagInterval) {
			lastNag = time.Now()

			n.machined.Printf("etcd is waiting to join the cluster, if this node is the first node in the cluster, please run `talosctl bootstrap` against one of the following IPs:")
			n.machined.Printf("%s", n.currentAddrsLog())
		}

		list, id, err := n.addMember(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return fatal{err}
			}

			return err
		}

		var conf []string

		for _, m := range list.Members {
			name := m.Name
			if m.ID == id {
				name = n.Hostname()
			}

			for _, u := range m.PeerURLs {
				conf = append(conf, name+"="+u)
			}

			if !m.IsLearner && m.ID != id {
				args.voterClientURLs = append(args.voterClientURLs, m.ClientURLs...)
			}
		}

		args.initialCluster = strings.Join(conf, ",")
		args.learnerID = id

		return nil
	})
	if err != nil {
		return etcdStartArgs{}, fmt.Errorf("failed to build cluster arguments: %w", err)
	}

	return args, nil
}

// addMember is one join attempt: list, remove a member with our name, add
// ourselves as a learner, list again, within the attempt's deadline (30 s,
// floored: joinAttemptFloor). loop is the join loop's context.
//
// Where the attempt's deadline is floored, the add and the list after it get
// the floor again from the moment the add is sent, when less of the attempt
// is left: a deadline that passes after etcd applied the add costs the node
// its learner slot for good (an unstarted learner Talos v1.12 cannot adopt),
// and what eats the attempt before the add is this machine's wall time — a
// first attempt waits in its member list for the first member's start and
// election, which took 12 s of wall time in a starved make test whose floor
// is 6 s (docs/measurements.md, "Stop 45"). A real node's 30 s covers both;
// the floor is listed as such (ClockFloorsAt).
func (n *Node) addMember(loop context.Context) (*clientv3.MemberListResponse, uint64, error) {
	deadline := time.Now().Add(n.c.clock.WallAtLeast(n.c.profile.JoinAttemptTimeout, joinAttemptFloor))

	ctx, cancel := context.WithDeadline(loop, deadline)
	defer cancel()

	// The client lives for the attempt: its own context is the loop's, so that
	// an add sent late outlives the first deadline (the dial does not block).
	client, err := n.clusterClient(loop)
	if err != nil {
		return nil, 0, err
	}

	defer client.Close() //nolint:errcheck

	ctx = clientv3.WithRequireLeader(ctx)

	list, err := client.MemberList(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("error getting etcd member list: %w", err)
	}

	for _, m := range list.Members {
		// A learner added but never started has no name yet, so it is never matched.
		if m.Name == n.Hostname() {
			if _, err = client.MemberRemove(ctx, m.ID); err != nil {
				return nil, 0, fmt.Errorf("error removing self from the member list: %w", err)
			}
		}
	}

	addrs := n.peerURLs()

	var floor time.Duration
	if _, floored := n.c.clock.Floored(joinAddFloor, n.c.profile.JoinAttemptTimeout, joinAttemptFloor); floored {
		floor = joinAttemptFloor
	}

	ctx, cancelAdd := context.WithDeadline(loop, addDeadline(deadline, time.Now(), floor))
	defer cancelAdd()

	ctx = clientv3.WithRequireLeader(ctx)

	add, err := client.MemberAddAsLearner(ctx, addrs)
	if err != nil {
		if n.c.profile.AdoptUnnamedLearner && errors.Is(err, rpctypes.ErrPeerURLExist) {
			// v1.14+: an unnamed learner with our peer URL is our own earlier add
			// whose reply was lost (talos 416d5fe4b): adopt it.
			for _, m := range list.Members {
				if slices.Equal(slices.Sorted(slices.Values(m.PeerURLs)), slices.Sorted(slices.Values(addrs))) && m.IsLearner && m.Name == "" {
					return list, m.ID, nil
				}
			}

			return nil, 0, fmt.Errorf("member already exists with the same peer URLs %q, but is not a learner: %w", addrs, err)
		}

		return nil, 0, fmt.Errorf("error adding member: %w", err)
	}

	list, err = client.MemberList(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("error getting second etcd member list: %w", err)
	}

	return list, add.Member.ID, nil
}

// addDeadline is when a join attempt's member add sent at now, in an attempt
// that ends at attempt, and the member list after it must be done by: the
// attempt's end, or floor after the add if that is later. floor is zero where
// the attempt's deadline is not floored (a time scale up to 7.5, or 5 under
// the race detector): there the attempt is Talos's.
func addDeadline(attempt, now time.Time, floor time.Duration) time.Time {
	if end := now.Add(floor); end.After(attempt) {
		return end
	}

	return attempt
}

// promoteLoop is promoteMember: it runs only right after a join, for 10 minutes,
// and then never again.
func (n *Node) promoteLoop(ctx context.Context, memberID uint64, voterClientURLs []string) {
	p := n.c.profile
	idx := 0

	err := retryLoop{
		total:          n.c.clock.Wall(p.PromoteWindow),
		interval:       n.c.clock.Wall(p.PromoteInterval),
		jitter:         n.c.clock.Wall(p.PromoteJitter),
		attemptTimeout: n.c.timeout(p.PromoteAttemptTimeout),
		logf:           n.machined.Printf,
		rng:            n.rng("promote"),
	}.run(ctx, func(ctx context.Context) error {
		endpoints, err := n.discoveredEndpoints()
		if err != nil {
			return err
		}

		if p.PromoteVotersFirst {
			return n.promoteVotersFirst(ctx, memberID, voterClientURLs, endpoints)
		}

		// v1.12–v1.14: walk every discovered endpoint, the learner's own included,
		// sharing one attempt deadline: a dead endpoint eats the whole attempt.
		for range endpoints {
			select {
			case <-ctx.Done():
				return ctx.Err()
			default:
			}

			endpoint := endpoints[idx%len(endpoints)]
			idx++

			if err = n.attemptPromote(ctx, endpoint, memberID); err == nil {
				return nil
			}
		}

		return err
	})

	switch {
	case err == nil:
		n.machined.Printf("successfully promoted etcd member")
	case !errors.Is(err, context.Canceled):
		n.machined.Printf("failed promoting member: %s", err)
	}
}

// promoteVotersFirst is main's loop: voting members first, own endpoints dropped,
// each endpoint bounded on its own.
func (n *Node) promoteVotersFirst(ctx context.Context, memberID uint64, voterClientURLs, discovered []string) error {
	self := map[string]bool{}
	for _, u := range n.clientURLs() {
		self[strings.TrimPrefix(u, "https://")] = true
	}
	seen := map[string]bool{}

	var errs []error

	for _, endpoint := range slices.Concat(voterClientURLs, discovered) {
		if _, hostPort, ok := strings.Cut(endpoint, "://"); ok {
			endpoint = hostPort
		}

		if self[endpoint] || seen[endpoint] {
			continue
		}

		seen[endpoint] = true

		select {
		case <-ctx.Done():
			return ctx.Err()
		default:
		}

		epCtx, cancel := context.WithTimeout(ctx, n.c.timeout(n.c.profile.PromoteEndpointTimeout))
		err := n.attemptPromote(epCtx, endpoint, memberID)

		cancel()

		if err == nil {
			return nil
		}

		errs = append(errs, fmt.Errorf("%s: %w", endpoint, err))
	}

	if len(errs) == 0 {
		return errors.New("no endpoints")
	}

	return errors.Join(errs...)
}

func (n *Node) attemptPromote(ctx context.Context, endpoint string, memberID uint64) error {
	client, err := n.newEtcdClient(ctx, []string{endpoint})
	if err != nil {
		return err
	}

	defer client.Close() //nolint:errcheck

	_, err = client.MemberPromote(ctx, memberID)

	return err
}

// healthLoop is the service health check: a linearizable read of "health" on the
// local member, first after 5 s, then every 20 s, each bounded to 15 s.
// The caller has initialised the health state (health.Run's Init), before
// the task's Running event.
func (n *Node) healthLoop(ctx context.Context, svc *service) {
	p := n.c.profile

	if !n.sleep(ctx, n.c.clock.Wall(p.HealthInitialDelay)) {
		return
	}

	// One client for the service's life, as health.Run's check keeps its own.
	client, err := n.newEtcdClient(ctx, []string{n.EtcdClientEndpoint()})
	if err != nil {
		svc.setHealth(false, err.Error())

		return
	}

	defer client.Close() //nolint:errcheck

	// A ticker, as health.Run's: checks start every period, however long
	// each took (a check longer than the period skips a tick).
	ticker := time.NewTicker(n.c.clock.Wall(p.HealthPeriod))
	defer ticker.Stop()

	for {
		checkCtx, cancel := context.WithTimeout(ctx, n.c.etcdTimeout(p.HealthTimeout))
		_, err := client.Get(checkCtx, "health")

		cancel()

		if ctx.Err() != nil {
			return
		}

		if errors.Is(err, rpctypes.ErrPermissionDenied) {
			err = nil
		}

		if err != nil {
			svc.setHealth(false, err.Error())
		} else {
			svc.setHealth(true, "")
		}

		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// runEtcdOnce runs the etcd "container" until it exits or the service stops.
func (n *Node) runEtcdOnce(ctx context.Context, svc *service, args etcdStartArgs) error {
	// The task's output goes to its log and to the last-log writer whose
	// lines a failure quotes (runner/containerd/containerd.go Run).
	var last lastLog

	out := io.MultiWriter(n.etcdLog, &last)

	cfg, err := n.embedConfig(args, out)
	if err != nil {
		return err
	}

	// The container is Running once its process starts, before etcd inside has
	// fetched the cluster from its peers (which blocks while there is no leader).
	n.mu.Lock()
	n.pid++
	pid := n.pid
	n.mu.Unlock()

	svc.update(stateRunning, "Started task etcd (PID %d) for container etcd", pid)

	guard := &stopGuard{}
	cfg.GRPCAdditionalServerOptions = append(cfg.GRPCAdditionalServerOptions, guard.options()...)

	e, err := embed.StartEtcd(cfg)
	if err == nil {
		guard.guard(e)
	}

	if err != nil {
		fatalLine(out, "discovery failed", err)

		return taskFailed(1, &last)
	}

	n.mu.Lock()
	n.etcd = e
	n.mu.Unlock()

	defer func() {
		n.dropLocalEtcd(e)

		n.mu.Lock()
		n.etcd = nil
		n.mu.Unlock()
	}()

	select {
	case <-ctx.Done():
		// A power cut or the simulator's own teardown kills the process;
		// otherwise Talos stops it with SIGTERM and etcd hands over leadership.
		killed := n.powerCut.Load() || n.c.ctx.Err() != nil
		if !killed {
			svc.update(stateStopping, "Sending SIGTERM to task etcd (PID %d, container etcd)", pid)
		}

		n.dropLocalEtcd(e)
		closeEtcd(e, guard, killed)

		return nil
	case err := <-e.Err():
		n.dropLocalEtcd(e)
		closeEtcd(e, guard, false)
		fatalLine(out, "etcd exited", err)
	case <-e.Server.StopNotify():
		n.dropLocalEtcd(e)
		closeEtcd(e, guard, false)
	}

	n.mu.Lock()
	code := n.exitCode
	n.exitCode = 0
	n.mu.Unlock()

	if code == 0 {
		code = 1
	}

	return taskFailed(code, &last)
}

// taskFailed is the containerd runner's error for a task that exited non-zero.
func taskFailed(code int, last *lastLog) error {
	return fmt.Errorf(`task "etcd" failed: exit code %d (last log %q)`, code, last.String())
}

// fatalLine writes the line etcd's zap logger writes before it exits, as
// etcd's production JSON encoder formats it.
func fatalLine(w io.Writer, msg string, err error) {
	line, _ := json.Marshal(struct { //nolint:errchkjson // strings only
		Level string `json:"level"`
		TS    string `json:"ts"`
		Msg   string `json:"msg"`
		Error string `json:"error"`
	}{"fatal", time.Now().UTC().Format("2006-01-02T15:04:05.000000Z0700"), msg, fmt.Sprint(err)})

	fmt.Fprintf(w, "%s\n", line) //nolint:errcheck // a lost log line must not stop the node
}

// drainWait bounds how long a kill waits for the streams it ends: a Watch
// handler returns as soon as its send loop has.
const drainWait = 5 * time.Second

// closeEtcd stops an embedded etcd, killed (no leadership transfer) or not.
// etcd 3.6's embed.Etcd.Close first waits for its client servers, which start
// only once the server is ready or stopping: a member that never got ready (a
// learner cut off from its leader) would block Close forever, so such a
// member is always killed first.
func closeEtcd(e *embed.Etcd, guard *stopGuard, kill bool) {
	select {
	case <-e.Server.ReadyNotify():
	default:
		kill = true
	}

	if kill {
		// A kill closes the backend while the client servers still serve:
		// end their streams first (stopGuard).
		guard.drain(drainWait)
		e.Server.HardStop()
	}

	e.Close()
}
