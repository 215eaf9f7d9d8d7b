// Package harness is the engine: it provisions a target, runs the orchestrator
// and the fault schedule, observes the nodes through the Talos API, and judges
// the outcome against the scenario's expectations. It never reaches behind the
// Talos API and imports neither sim nor fakes.
package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"runtime/pprof"
	"strconv"
	"time"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/constants"

	"github.com/talchaos/talchaos/harness/buildinfo"
	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/check"
	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/orchestrator"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/secretbundle"
	"github.com/talchaos/talchaos/harness/target"
)

// PromoteWindow is Talos's promote loop budget on every line (TALOS-FIDELITY.md §1).
const PromoteWindow = 10 * time.Minute

// InputError is a problem with the scenario or the command line (exit code 2).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Options tune one run.
type Options struct {
	Target target.Target
	Seed   int64
	// Replay is the command that reproduces the run, recorded in the report.
	Replay string
	// OnEvent, when set, sees every event as it is recorded (progress output).
	OnEvent func(eventlog.Event)
	// ObserveInterval is the real-time polling interval; default 100 ms.
	ObserveInterval time.Duration
	// Orchestrator, when set, bootstraps instead of the scenario's
	// (sim/simtest.Certify's Go function).
	Orchestrator orchestrator.Orchestrator
	// UntilConverged keeps observing a settled cluster that has not
	// converged until expect.within ends (certify: a command that exits
	// before the cluster has formed by itself is not judged early).
	UntilConverged bool
	// AllowDestructive permits destructive faults and orchestrator remedies
	// on a target whose nodes outlive the run (real nodes).
	AllowDestructive bool
	// Recorded, when replaying, is the replayed run's resolved schedule.
	Recorded []result.Planned
}

// Destructive reports whether destructive faults and remedies may run: always
// on disposable nodes, on real ones only with the user's permission.
func (o Options) Destructive() bool { return o.Target.Disposable() || o.AllowDestructive }

// Run runs one scenario. It always returns a result; the error is non-nil when
// the result is an error verdict, and is an *InputError for bad input.
func Run(ctx context.Context, sc *scenario.Scenario, opts Options) (*result.Result, error) {
	start := time.Now()
	scale := opts.Target.TimeScale(sc)
	log := eventlog.New()
	scrubber := &result.Scrubber{}
	log.SetScrubber(scrubber.Scrub)

	if opts.OnEvent != nil {
		log.OnEvent(opts.OnEvent)
	}

	res := &result.Result{
		Schema:    result.Schema,
		Scenario:  sc.Name,
		File:      sc.File,
		Target:    opts.Target.Name(),
		Seed:      opts.Seed,
		Talos:     sc.Talos,
		TimeScale: scale,
		StartedAt: start.UTC().Format(time.RFC3339),
		Replay:    opts.Replay,

		ScenarioTimeScale: sc.TimeScale,
		ClockFloors:       clockFloors(opts.Target, sc),
		Tool:              buildinfo.Read(),
		Description:       sc.Description,
		Reproduces:        sc.Reproduces,
		Source:            SourceOf(sc),
	}

	finish := func(err error) (*result.Result, error) {
		res.Events = log.Events()
		res.DurationMs = time.Since(start).Milliseconds()

		if err != nil {
			res.Verdict = result.Error
			res.Error = err.Error()
		}

		scrubber.ScrubResult(res)

		return res, scrubber.ScrubError(err)
	}

	planned, err := chaos.Plan(sc, opts.Target, chaos.PlanOptions{Seed: opts.Seed, AllowDestructive: opts.AllowDestructive, Recorded: opts.Recorded})
	if err != nil {
		return finish(&InputError{err})
	}

	for _, p := range planned {
		res.Schedule = append(res.Schedule, p.Record())
	}

	orch := opts.Orchestrator
	if orch == nil {
		if orch, err = orchestrator.New(sc.Orchestrator); err != nil {
			return finish(&InputError{sc.Errorf("orchestrator.name", "%s", err)})
		}
	}

	log.Add("", "run.start", fmt.Sprintf("scenario %s on %s, seed %d, talos %s, %s", sc.Name, opts.Target.Name(), opts.Seed, sc.Talos, ScaleNote(sc, opts.Target)))

	var cluster target.Cluster

	part(ctx, "nodes", func(ctx context.Context) {
		cluster, err = opts.Target.Provision(ctx, sc, target.Options{Seed: opts.Seed})
	})

	if err != nil {
		return finish(fmt.Errorf("provision %s: %w", opts.Target.Name(), err))
	}

	defer cluster.Close() //nolint:errcheck

	scrubber.Add(SecretsOf(cluster)...)

	for _, n := range cluster.Nodes() {
		log.Add(n.Name, "node.provisioned", fmt.Sprintf("%s %s, Talos API %s", n.Role, n.Address, n.Endpoint))
	}

	err = runCluster(ctx, sc, clock.New(scale), opts, orch, planned, cluster, log, scrubber, res)

	return finish(err)
}

func runCluster(ctx context.Context, sc *scenario.Scenario, clk clock.Clock, opts Options, orch orchestrator.Orchestrator,
	planned []chaos.Planned, cluster target.Cluster, log *eventlog.Log, scrubber *result.Scrubber, res *result.Result,
) error {
	interval := opts.ObserveInterval
	if interval == 0 {
		interval = 100 * time.Millisecond
	}

	var nodes []history.Node
	for _, n := range cluster.Nodes() {
		nodes = append(nodes, history.NodeOf(n))
	}

	// The record the verdict is drawn from, whatever happens next.
	rec := history.NewRecorder(log.Start(), clk, nodes)
	rec.SetScrubber(scrubber.Scrub)

	// Stalls are watched for from here (watchStalls), though the watch
	// starts after the observer: one while it connects is not missed.
	watchedSince := time.Now()

	defer func() {
		h := rec.History()
		res.History = &h
	}()

	// The evidence of the history as it is recorded: what state triggers and
	// the narration read, the fold the verdict is drawn from afterwards.
	live := judge.Follow(rec, judge.Options{})

	var (
		observer *check.Observer
		err      error
	)

	part(ctx, "observer", func(ctx context.Context) {
		observer, err = check.NewObserver(ctx, cluster.Nodes(), cluster.Talosconfig(), log, rec, live, interval)
	})

	if err != nil {
		return fmt.Errorf("observer: %w", err)
	}

	if sc.Orchestrator.UpgradeTo != "" {
		observer.WatchVersions()
	}

	defer observer.Close()

	if sc.Cluster.Kubernetes {
		observer.WatchKubernetes()
	}

	bgCtx, bgCancel := context.WithCancel(ctx)
	defer bgCancel()

	observed := make(chan struct{})

	go part(bgCtx, "observer", func(ctx context.Context) {
		defer close(observed)

		observer.Run(ctx)
	})

	stallsWatched := make(chan struct{})

	go part(bgCtx, "stalls", func(ctx context.Context) {
		defer close(stallsWatched)

		watchStalls(ctx, log, rec, stallTick, stallGapAt(clk), watchedSince)
	})

	schedule := chaos.NewSchedule(planned, cluster, log, rec, clk)
	scheduled := make(chan struct{})
	ticks := observer.Subscribe()

	go part(bgCtx, "faults", func(ctx context.Context) {
		defer close(scheduled)

		schedule.Run(ctx, ticks, live)
	})

	talosconfig := cluster.Talosconfig()

	if sc.Orchestrator.Talosconfig == "other-secrets" {
		if talosconfig, err = foreignTalosconfig(cluster.Nodes()); err != nil {
			return fmt.Errorf("talosconfig from other secrets: %w", err)
		}

		scrubber.Add(result.TalosconfigSecrets(talosconfig)...)

		log.Add("", "orchestrator.talosconfig", "the orchestrator uses a talosconfig generated from other secrets")
	}

	// The orchestrator gets its own budget; the run ends when it returns or when
	// the scenario's window closes. The window opens with the nodes: a
	// cluster that waited for its addresses (another seed of the hunt held
	// them, sim.claimAddrs) or took long to provision has all of it.
	within := log.Since() + clk.Wall(sc.Expect.Within.Duration)

	orchCtx, orchCancel := context.WithTimeout(ctx, min(clk.Wall(sc.Orchestrator.Timeout.Duration), within-log.Since()))
	defer orchCancel()

	env := &orchestrator.Env{
		Nodes:         cluster.Nodes(),
		Talosconfig:   talosconfig,
		BootstrapNode: sc.Orchestrator.BootstrapNode,
		Log:           log,
		Record:        rec,
		Clock:         clk,
		Destructive:   opts.Destructive(),
		Kubernetes:    sc.Cluster.Kubernetes,
		UpgradeTo:     sc.Orchestrator.UpgradeTo,
	}

	if sc.Cluster.Network != nil && sc.Cluster.Network.EndpointAddr().IsValid() {
		env.ClusterEndpoint = net.JoinHostPort(sc.Cluster.Network.EndpointAddr().String(), strconv.Itoa(constants.ApidPort))
	}

	if cf, ok := cluster.(target.ClientFaults); ok {
		env.Faults = cf
	}

	var orchErr error

	part(orchCtx, "orchestrator", func(ctx context.Context) { orchErr = orch.Run(ctx, env) })

	res.Orchestrator = &result.OrchestratorEnd{
		Name: orch.Name(), TimedOut: orchErr != nil && ctx.Err() == nil && errors.Is(orchCtx.Err(), context.DeadlineExceeded),
	}

	if orchErr != nil {
		res.Orchestrator.Error = orchErr.Error()
	}

	switch orch.(type) {
	case *orchestrator.Exec:
		if code, ok := orchestrator.ExitCode(orchErr); ok {
			res.Orchestrator.ExitCode = &code
		}
	case *orchestrator.Func:
		// Its exit: 0 for nil, 1 for an error it returned in time.
		if !res.Orchestrator.TimedOut {
			code := 0
			if orchErr != nil {
				code = 1
			}

			res.Orchestrator.ExitCode = &code
		}
	}

	// stopBackground ends the observer, the schedule and the stall watch and
	// keeps what the schedule did.
	stopBackground := func() {
		bgCancel()
		<-observed
		<-scheduled
		<-stallsWatched
		schedule.Stop()

		res.Faults = schedule.Records()
	}

	switch {
	case ctx.Err() != nil:
		stopBackground()

		return fmt.Errorf("interrupted: %w", ctx.Err())
	case orchErr != nil:
		log.Add("", "orchestrator.failed", orchErr.Error())
	default:
		log.Add("", "orchestrator.finished", orch.Name()+" finished")
	}

	cadence := judge.CadenceAt(clk, res.ClockFloors, observer.PollCadence())
	cadence.PollSince = observer.PollCadenceSince

	settle(ctx, sc, clk, within, cadence, interval, log, rec, observer, opts.UntilConverged)

	stopBackground()

	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}

	// The verdict is the judge's, from the record alone; the record ends
	// here, so the report holds what the verdict was drawn from (a log line
	// still streaming in would otherwise make a rejudge differ).
	rec.Close()

	judge.Judge(rec.History(), sc.Expect).Apply(res)

	for _, d := range res.Diagnoses {
		log.Add(d.Node, "diagnosis."+d.Code, d.Message)
	}

	log.Add("", "run.verdict", res.Verdict)

	return nil
}

// settle keeps observing after the orchestrator returned: at least
// expect.settle (so the nodes catch up with what just happened and faults
// that strike a formed cluster play out), then until the state the verdict
// is drawn from has held for its window, so the verdict does not depend on
// the instant of the last poll, nor come while an observation that could
// change it is on its way: expect.stable, and at least every node's next
// answer and every running etcd member's next health check, in wall time
// with the target's clock floors (judge.Cadence). A state that keeps
// changing is judged as it is after expect.settle plus SettleBound (at
// least three of the longest windows: each change after a formation's last
// step, a member seen promoted, its health check passing, its stage running,
// starts the window again), or when expect.within ends. The run's last look
// (the final poll) must agree with the steady state, or the wait goes on.
func settle(ctx context.Context, sc *scenario.Scenario, clk clock.Clock, within time.Duration, cadence judge.Cadence, interval time.Duration,
	log *eventlog.Log, rec *history.Recorder, observer *check.Observer, untilConverged bool,
) {
	least := clk.Wall(sc.Expect.Settle.Duration)
	stable := clk.Wall(sc.Expect.Stable.Duration)
	bound := clk.Wall(sc.Expect.Settle.Duration + scenario.SettleBound)

	start := log.Since()
	end := min(start+max(bound, least+settleWindows*cadence.Longest(stable)), within)

	log.Add("", "run.settle", fmt.Sprintf("observing for %s at least, then until the state has held for %s and for every etcd member's next health check and every node's next poll (at most %s while etcd runs), at most %s",
		sc.Expect.Settle, sc.Expect.Stable, clk.TalosString(cadence.Longest(stable)), clk.TalosString(end-start)))

	wait := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(max(d, 0)):
			return true
		}
	}

	if !wait(min(start+least, end) - log.Since()) {
		return
	}

	// waiting: settled but not converged (untilConverged): a final look
	// once a second at most, not at every poll.
	var waiting, lastFinal time.Duration

	for {
		// Quiet until now is a hint; the final look decides, with the times
		// the judge uses (a final look that itself saw a change has not seen
		// it hold).
		if judge.Settled(rec.History(), rec.Since(), cadence, stable) && (waiting == 0 || log.Since()-lastFinal >= time.Second) {
			lastFinal = log.Since()

			observer.Final(ctx)

			if judge.SettledAtFinal(rec.History(), cadence, stable) {
				if !untilConverged || log.Since() >= within || judge.Judge(rec.History(), sc.Expect).Outcome.Converged {
					return
				}

				if waiting == 0 {
					log.Add("", "run.waiting", "settled but not converged: observing until it converges or expect.within ends")
				}

				waiting, end = log.Since(), within
			}

			observer.Thaw()
		}

		if log.Since() >= end {
			why := fmt.Sprintf("within %s of settling", clk.TalosString(end-start))
			if end == within {
				why = fmt.Sprintf("before expect.within (%s) ended", sc.Expect.Within)
			}

			log.Add("", "run.unsettled", fmt.Sprintf("the state did not hold still for %s %s; judging it as it is", sc.Expect.Stable, why))
			observer.Final(ctx)

			return
		}

		if !wait(min(interval, end-log.Since())) {
			return
		}
	}
}

// part runs f with the profiler label part=name, which every goroutine it
// starts inherits (the nodes' servers and etcd members, the observer's and the
// orchestrator's gRPC connections): a CPU profile (make bench's, or
// TALCHAOS_CPUPROFILE) then says which part of a run spent the CPU.
func part(ctx context.Context, name string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("part", name), f)
}

// settleWindows is how many of its longest windows a settle waits at least
// for a state that keeps changing.
const settleWindows = 3

// SourceOf is the scenario file as it was parsed, with its sha256.
func SourceOf(sc *scenario.Scenario) *result.Source {
	if sc.Source == nil {
		return nil
	}

	sum := sha256.Sum256(sc.Source)

	return &result.Source{Path: sc.File, SHA256: hex.EncodeToString(sum[:]), Content: string(sc.Source)}
}

// ScaleNote says which time scale a run on the target uses, and why when it
// is not the scenario's.
func ScaleNote(sc *scenario.Scenario, tgt target.Target) string {
	scale := tgt.TimeScale(sc)
	if scale == sc.TimeScale {
		return fmt.Sprintf("time scale %g", scale)
	}

	if r, ok := tgt.(target.ScaleReasoner); ok {
		return fmt.Sprintf("time scale %g, not the scenario's %g: %s", scale, sc.TimeScale, r.ScaleReason(sc))
	}

	return fmt.Sprintf("time scale %g: the %s target's nodes run their own timers (the scenario's %g is for simulated nodes)", scale, tgt.Name(), sc.TimeScale)
}

// SecretsOf lists what a run must never print: every secret of every node's
// machine config (tokens, cluster secret, encryption secrets, CA and
// service-account keys, and whatever else Talos's own redaction knows of), the
// talosconfig's credentials and whatever secrets the target declares (API
// tokens). Node.Config holds the bytes on every target, so this works
// whether the configs were generated or read from an inventory. Register them
// with a result.Scrubber before anything can print them.
func SecretsOf(cluster target.Cluster) []string {
	out := result.TalosconfigSecrets(cluster.Talosconfig())

	for _, n := range cluster.Nodes() {
		// A config the machinery cannot load still gives what sits under the
		// usual secret field names; the node will refuse it anyway.
		values, _ := result.MachineConfigSecrets(n.Config) //nolint:errcheck
		out = append(out, values...)
	}

	if s, ok := cluster.(target.SecretHolder); ok {
		out = append(out, s.Secrets()...)
	}

	return out
}

// foreignTalosconfig is a talosconfig for the same endpoints from a fresh secrets
// bundle: what `talosctl gen config --force` leaves behind (field report FR-001).
func foreignTalosconfig(nodes []target.Node) (*clientconfig.Config, error) {
	bundle, err := secretbundle.New(config.TalosVersionCurrent)
	if err != nil {
		return nil, err
	}

	var endpoints []string

	for _, n := range nodes {
		if n.Role == target.ControlPlane {
			endpoints = append(endpoints, n.Address)
		}
	}

	in, err := generate.NewInput("talchaos", "https://127.0.0.1:6443", "1.34.1",
		generate.WithSecretsBundle(bundle), generate.WithEndpointList(endpoints))
	if err != nil {
		return nil, err
	}

	return in.Talosconfig()
}

// IsInputError reports whether err is bad input (exit code 2).
func IsInputError(err error) bool {
	var ie *InputError

	var se *scenario.Error

	var ses scenario.Errors

	return errors.As(err, &ie) || errors.As(err, &se) || errors.As(err, &ses)
}

// clockFloors is what the target says it cannot scale, for the report.
func clockFloors(tgt target.Target, sc *scenario.Scenario) []result.ClockFloor {
	f, ok := tgt.(target.ClockFloorer)
	if !ok {
		return nil
	}

	var out []result.ClockFloor

	for _, c := range f.ClockFloors(sc) {
		out = append(out, result.ClockFloor{What: c.What, TalosMs: c.Talos.Milliseconds(), ModelledMs: c.Modelled.Milliseconds()})
	}

	return out
}
