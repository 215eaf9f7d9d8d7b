package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Planned is one fault of a scenario, resolved for a run: "random" replaced by
// the node the seed picked, its own seed drawn.
type Planned struct {
	Spec scenario.Fault
	Kind Kind
	// Nodes are the nodes the fault acts on.
	Nodes []string
	// Seed is the fault's own random stream (latency jitter).
	Seed uint64
}

// Record is the fault as resolved, for reports.
func (p Planned) Record() result.Planned {
	return result.Planned{
		Name: p.Spec.Name, Kind: p.Spec.Kind, Nodes: p.Nodes, Trigger: p.Trigger(), Seed: p.Seed, Params: ParamsOf(p.Kind),
	}
}

// Node names the nodes the fault acts on, for reports: "cp2", "cp1|cp3".
func (p Planned) Node() string { return strings.Join(p.Nodes, "|") }

// Trigger describes when the fault starts, for reports and --plan.
func (p Planned) Trigger() string {
	s := "at start"

	switch {
	case p.Spec.At != nil:
		s = "at " + p.Spec.At.String()
	case p.Spec.When != nil:
		s = "when " + describe(*p.Spec.When)
		if p.Spec.When.After.Duration > 0 {
			s += ", after " + p.Spec.When.After.String()
		}
	}

	if p.Spec.For.Duration > 0 {
		s += ", for " + p.Spec.For.String()
	}

	if u := p.Spec.Until; u != nil {
		s += ", until " + describe(*u)
		if u.After.Duration > 0 {
			s += " + " + u.After.String()
		}
	}

	return s
}

// PlanOptions are a run's choices for its plan.
type PlanOptions struct {
	// Seed makes every random choice of the schedule.
	Seed int64
	// AllowDestructive permits destructive faults on nodes that outlive the run.
	AllowDestructive bool
	// Recorded, when replaying a run, are the faults as that run resolved them:
	// a fault of the same name and kind takes the recorded nodes and seed
	// instead of drawing them, whatever this version of talchaos would draw.
	Recorded []result.Planned
}

// Plan resolves every fault of the scenario for a run on the target and checks,
// before anything starts, that the target can run the scenario and carry out
// every fault on its nodes, and that destructive faults on nodes that are not
// disposable (real ones) were allowed. The seed makes every random choice of
// the schedule: which node "random" names, each fault's own seed.
func Plan(sc *scenario.Scenario, tgt target.Target, opts PlanOptions) ([]Planned, error) {
	seed, allowDestructive := opts.Seed, opts.AllowDestructive

	if err := tgt.Check(sc); err != nil {
		return nil, err
	}

	rng := rand.New(rand.NewPCG(uint64(seed), 0x7a1c4a05)) //nolint:gosec // reproducibility, not secrecy

	var candidates []string

	for _, n := range sc.Cluster.NodeNames() {
		if scenario.IsControlPlane(n) && n != sc.Orchestrator.BootstrapNode {
			candidates = append(candidates, n)
		}
	}

	var (
		out  []Planned
		errs []*scenario.Error
	)

	for _, f := range sc.Faults {
		// Draw for every fault, used or not, so one fault's choice never shifts another's.
		pick, faultSeed := rng.IntN(max(len(candidates), 1)), rng.Uint64()

		kind, ok := f.Spec.(Kind)
		if !ok {
			errs = append(errs, f.Errorf(sc, "kind", "unknown fault kind %q", f.Kind))

			continue
		}

		if r, ok := recorded(opts.Recorded, f); ok {
			faultSeed = r.Seed

			if usesRandom(kind) && len(r.Nodes) == 1 {
				kind = withNode(kind, r.Nodes[0])
				f.Spec = kind
			}
		}

		if usesRandom(kind) {
			if len(candidates) == 0 {
				errs = append(errs, f.Errorf(sc, "node", "no control plane other than the bootstrap node to pick at random"))

				continue
			}

			kind = withNode(kind, candidates[pick])
			f.Spec = kind
		}

		p := Planned{Spec: f, Kind: kind, Nodes: NodesOf(kind), Seed: faultSeed}

		if err := permitted(sc, tgt, p, allowDestructive); err != nil {
			errs = append(errs, f.Errorf(sc, "kind", "%s", err))

			continue
		}

		out = append(out, p)
	}

	// A rolling upgrade reboots every node into another Talos version:
	// destructive on nodes that outlive the run, as a reboot fault is.
	if sc.Orchestrator.UpgradeTo != "" && !tgt.Disposable() && !allowDestructive {
		errs = append(errs, sc.Errorf("orchestrator.upgradeTo",
			"upgrading reboots every node into another Talos version, destructive on the %s target's nodes, which outlive the run: pass --allow-destructive to run it", tgt.Name()))
	}

	if err := scenario.Collect(errs); err != nil {
		return nil, err
	}

	return out, nil
}

// recorded finds a fault's resolution in a replayed run's schedule.
func recorded(schedule []result.Planned, f scenario.Fault) (result.Planned, bool) {
	for _, r := range schedule {
		if r.Name == f.Name && r.Kind == f.Kind {
			return r, true
		}
	}

	return result.Planned{}, false
}

// permitted checks the target can carry out the fault on its nodes, and may.
func permitted(sc *scenario.Scenario, tgt target.Target, p Planned, allowDestructive bool) error {
	for _, need := range p.Kind.Needs(sc) {
		nodes := p.Nodes
		if len(nodes) == 0 {
			nodes = []string{""}
		}

		for _, n := range nodes {
			if err := tgt.Supports(need, n); err != nil {
				return fmt.Errorf("target %s cannot inject %s: %w", tgt.Name(), p.Kind.Kind(), err)
			}
		}
	}

	if p.Kind.Destructive() && !tgt.Disposable() && !allowDestructive {
		return fmt.Errorf("%s is destructive on the %s target's nodes, which outlive the run: pass --allow-destructive to run it", p.Kind.Kind(), tgt.Name())
	}

	return nil
}

// Schedule runs the planned faults against a cluster.
type Schedule struct {
	planned []Planned
	cluster target.Cluster
	log     *eventlog.Log
	rec     *history.Recorder
	clock   clock.Clock

	mu      sync.Mutex
	records []*result.Fault
	heals   map[int]target.Heal
	wg      sync.WaitGroup
}

// NewSchedule prepares the run of the planned faults.
func NewSchedule(planned []Planned, cluster target.Cluster, log *eventlog.Log, rec *history.Recorder, clk clock.Clock) *Schedule {
	s := &Schedule{planned: planned, cluster: cluster, log: log, rec: rec, clock: clk, heals: map[int]target.Heal{}}

	for _, p := range planned {
		s.records = append(s.records, &result.Fault{
			Name: p.Spec.Name, Kind: p.Spec.Kind, Node: p.Node(), Trigger: p.Trigger(), StartMs: -1, EndMs: -1,
		})
	}

	return s
}

func (s *Schedule) real(d scenario.Duration) time.Duration { return s.clock.Wall(d.Duration) }

// Run starts each fault when its trigger fires and heals it when its duration
// ends. State triggers watch the run's live evidence (the judge's fold of the
// history) entry by entry, so a state the history shows fires its trigger
// however briefly it held: a learner promoted a few hundred milliseconds
// after it was first seen, on a machine too loaded to read the evidence
// between the two looks, still starts the fault meant for it (late, as on a
// real machine that slow). What fired is acted on at the next tick (one per
// recorded poll). It returns when ctx ends; Stop heals what is still active.
func (s *Schedule) Run(ctx context.Context, ticks <-chan struct{}, live *judge.Live) {
	a := newArmed(len(s.planned))

	for i, p := range s.planned {
		switch {
		case p.Spec.When != nil:
			a.when[i] = true
		case p.Spec.At != nil:
			s.startAfter(ctx, i, s.real(*p.Spec.At))
		default:
			s.startAfter(ctx, i, 0)
		}
	}

	live.Watch(func(ev *judge.Evidence, e history.Entry) { a.check(s.planned, ev, e.WallMs) })

	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ticks:
			if !ok {
				<-ctx.Done()

				return
			}

			// An until trigger is armed once its fault is active, from now
			// on: s.mu is not taken while the evidence is read (recording
			// waits meanwhile, and a fault's start records under s.mu).
			for i, p := range s.planned {
				if p.Spec.Until != nil && s.active(i) {
					a.armUntil(i, s.rec.Since().Milliseconds())
				}
			}

			// The evidence as it is now, for the states that held before a
			// trigger was armed and have not changed since (nothing new is
			// recorded then); reading it also folds in entries recorded out
			// of order, which the watch then sees.
			live.Read(func(ev *judge.Evidence) { a.check(s.planned, ev, -1) })

			starts, heals := a.take()

			for _, i := range starts {
				w := s.planned[i].Spec.When

				s.log.Add(w.Node, "fault.trigger", fmt.Sprintf("%s: %s", s.planned[i].Spec.Name, describe(*w)))
				s.rec.Trigger(w.Node, history.Trigger{Fault: s.planned[i].Spec.Name, State: w.State, Count: w.Count, AfterMs: w.After.Milliseconds()})
				s.startAfter(ctx, i, s.real(w.After))
			}

			for _, i := range heals {
				p := s.planned[i]
				u := p.Spec.Until

				s.log.Add(u.Node, "fault.trigger", fmt.Sprintf("%s heals in %s: %s", p.Spec.Name, u.After, describe(*u)))
				s.rec.Trigger(u.Node, history.Trigger{Fault: p.Spec.Name, State: u.State, Count: u.Count, Heal: true, AfterMs: u.After.Milliseconds()})
				s.healAfter(ctx, i, s.real(u.After))
			}
		}
	}
}

// armed are the state triggers waiting, and those that fired and are not
// acted on yet. It has its own lock: the watch runs with the recorder locked,
// and takes nothing else.
type armed struct {
	mu   sync.Mutex
	when []bool
	// until holds, for each until trigger armed, the offset (wall ms) from
	// which entries count: a state seen before the fault started does not
	// heal it; or unarmed, or fired.
	until         []int64
	starts, heals []int
}

// An until trigger's offset when it is not armed yet, and once it fired.
const (
	unarmed = -1
	fired   = -2
)

func newArmed(n int) *armed {
	a := &armed{when: make([]bool, n), until: make([]int64, n)}
	for i := range a.until {
		a.until[i] = unarmed
	}

	return a
}

// armUntil arms fault i's until trigger, counting entries from fromMs on,
// unless it is armed or fired already.
func (a *armed) armUntil(i int, fromMs int64) {
	a.mu.Lock()
	defer a.mu.Unlock()

	if a.until[i] == unarmed {
		a.until[i] = fromMs
	}
}

// check fires the armed triggers that hold in ev, as it stands after the
// entry recorded at atMs (-1: as it stands now).
func (a *armed) check(planned []Planned, ev *judge.Evidence, atMs int64) {
	a.mu.Lock()
	defer a.mu.Unlock()

	v := View{Obs: ev.Current(), PromoteRefusals: ev.PromoteRefusals}

	for i, waiting := range a.when {
		if waiting && Holds(v, *planned[i].Spec.When) {
			a.when[i] = false
			a.starts = append(a.starts, i)
		}
	}

	for i, from := range a.until {
		if from >= 0 && (atMs < 0 || atMs >= from) && Holds(v, *planned[i].Spec.Until) {
			a.until[i] = fired
			a.heals = append(a.heals, i)
		}
	}
}

// take returns the triggers that fired since the last take.
func (a *armed) take() (starts, heals []int) {
	a.mu.Lock()
	defer a.mu.Unlock()

	starts, heals = a.starts, a.heals
	a.starts, a.heals = nil, nil

	return starts, heals
}

func (s *Schedule) startAfter(ctx context.Context, i int, delay time.Duration) {
	s.wg.Go(func() {
		if delay > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
		}

		s.start(ctx, i)

		if d := s.planned[i].Spec.For; d.Duration > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.real(d)):
			}

			s.heal(i)
		}
	})
}

// active reports whether the fault is injected now.
func (s *Schedule) active(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()

	_, ok := s.heals[i]

	return ok
}

func (s *Schedule) healAfter(ctx context.Context, i int, delay time.Duration) {
	s.wg.Go(func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}

		s.heal(i)
	})
}

func (s *Schedule) start(ctx context.Context, i int) {
	p := s.planned[i]
	rec := s.records[i]

	heal, err := p.Kind.Inject(ctx, &Env{Cluster: s.cluster, Clock: s.clock, Seed: p.Seed})

	s.mu.Lock()
	defer s.mu.Unlock()

	rec.StartMs = s.log.Since().Milliseconds()

	if err != nil {
		rec.Error = err.Error()
		s.log.Add(p.Node(), "fault.error", fmt.Sprintf("%s (%s): %s", p.Spec.Name, p.Spec.Kind, err))
		s.rec.Fault(history.FaultEvent{Name: p.Spec.Name, Kind: p.Spec.Kind, Phase: history.FaultFailed, Nodes: p.Nodes, Error: err.Error()})

		return
	}

	s.heals[i] = heal
	s.log.Add(p.Node(), "fault.start", fmt.Sprintf("%s (%s) %s", p.Spec.Name, p.Spec.Kind, p.Trigger()))
	s.rec.Fault(history.FaultEvent{Name: p.Spec.Name, Kind: p.Spec.Kind, Phase: history.FaultStarted, Nodes: p.Nodes})
}

func (s *Schedule) heal(i int) {
	s.mu.Lock()
	heal, ok := s.heals[i]
	delete(s.heals, i)
	s.mu.Unlock()

	if !ok {
		return
	}

	p := s.planned[i]
	err := heal()

	s.mu.Lock()
	defer s.mu.Unlock()

	s.records[i].EndMs = s.log.Since().Milliseconds()

	if err != nil {
		s.records[i].Error = err.Error()
		s.log.Add(p.Node(), "fault.error", fmt.Sprintf("%s: heal: %s", p.Spec.Name, err))
		s.rec.Fault(history.FaultEvent{Name: p.Spec.Name, Kind: p.Spec.Kind, Phase: history.FaultFailed, Nodes: p.Nodes, Error: "heal: " + err.Error()})

		return
	}

	s.log.Add(p.Node(), "fault.stop", fmt.Sprintf("%s (%s) healed", p.Spec.Name, p.Spec.Kind))
	s.rec.Fault(history.FaultEvent{Name: p.Spec.Name, Kind: p.Spec.Kind, Phase: history.FaultStopped, Nodes: p.Nodes})
}

// Stop waits for the fault goroutines (their context must be done) and heals
// every fault still active.
func (s *Schedule) Stop() {
	s.wg.Wait()

	for i := range s.planned {
		s.heal(i)
	}
}

// Records are the faults as they ran.
func (s *Schedule) Records() []result.Fault {
	s.mu.Lock()
	defer s.mu.Unlock()

	out := make([]result.Fault, 0, len(s.records))
	for _, r := range s.records {
		out = append(out, *r)
	}

	return out
}
