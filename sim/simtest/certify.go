package simtest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"

	"github.com/talchaos/talchaos/harness"
	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/orchestrator"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/scenarios"
	"github.com/talchaos/talchaos/sim"
)

// Bootstrap is a user's own bootstrap code, FR-004's shape: given the
// cluster's talosconfig, its nodes (in maintenance, each with its machine
// configuration) and the node to bootstrap, it returns nil once it has
// formed the cluster, or an error when it gives up. It must return when ctx
// ends: that is the scenario's time running out (the run is then hung).
type Bootstrap func(ctx context.Context, talosconfig *clientconfig.Config, nodes []Node, bootstrapNode string) error

// CertifyOptions pick what Certify runs.
type CertifyOptions struct {
	// Scenarios are built-in names or scenario files; empty means every
	// built-in that certify runs (those that need Kubernetes only where it
	// can run).
	Scenarios []string
	// Seeds default to 1.
	Seeds []int64
	// ReportDir, when set, receives each run's report in
	// ReportDir/SCENARIO/seed-N.
	ReportDir string
	// TimeScale, when set, replaces every scenario's.
	TimeScale float64
	// Upgrade, when set, is the user's rolling upgrade: the scenarios with
	// one (orchestrator.upgradeTo) run, and it is called after the bootstrap
	// returned nil, with the installer image to upgrade every node to.
	// Without it those scenarios are skipped (an error when named).
	Upgrade Upgrade
}

// Upgrade is a user's rolling upgrade of a bootstrapped cluster to an
// installer image, as certify calls it.
type Upgrade func(ctx context.Context, talosconfig *clientconfig.Config, nodes []Node, image string) error

// CertifyResult is one scenario × seed: the outcome (reports.Survived,
// Loud, FalseAlarm, Void, Silent, Hung or RunError) and what the scenario
// expects of a good bootstrap.
type CertifyResult struct {
	Scenario  string
	Seed      int64
	Outcome   string
	Expected  string
	Diagnoses []string
	// Err is the bootstrap's own error, or the run's.
	Err error
}

// Held reports whether the outcome is the expected one, or better.
func (r CertifyResult) Held() bool { return reports.CertifyHeld(r.Outcome, r.Expected) }

func (r CertifyResult) String() string {
	return fmt.Sprintf("%s seed %d: %s (expected %s; diagnoses %v; error %v)", r.Scenario, r.Seed, r.Outcome, r.Expected, r.Diagnoses, r.Err)
}

// Certify runs bootstrap as the orchestrator of the scenarios, one after
// the other, and classifies each run as `talchaos certify` does; a run
// voided by a stall of the host is made again, up to VoidRuns in all (the
// outcome is Void if every one was). An error is bad input (an unknown
// scenario, one that says nothing of what a good bootstrap does) or ctx
// ending.
func Certify(ctx context.Context, bootstrap Bootstrap, opts CertifyOptions) ([]CertifyResult, error) {
	scs, err := certifyScenarios(opts.Scenarios, opts.Upgrade != nil)
	if err != nil {
		return nil, err
	}

	seeds := opts.Seeds
	if len(seeds) == 0 {
		seeds = []int64{1}
	}

	var out []CertifyResult

	for _, sc := range scs {
		for _, seed := range seeds {
			r, err := certifyOne(ctx, bootstrap, sc, seed, opts)
			if err != nil {
				return out, err
			}

			out = append(out, r)
		}
	}

	return out, nil
}

func certifyOne(ctx context.Context, bootstrap Bootstrap, sc *scenario.Scenario, seed int64, opts CertifyOptions) (CertifyResult, error) {
	// The orchestrator's name is the scenario's, for the report: Options'
	// Orchestrator (the function) bootstraps.
	run := sc.ForCertify(scenario.Orchestrator{Name: sc.Orchestrator.Name}, opts.TimeScale)

	var userErr error

	orch := &orchestrator.Func{F: func(ctx context.Context, env *orchestrator.Env) error {
		nodes := make([]Node, 0, len(env.Nodes))
		boot := ""

		for _, n := range env.Nodes {
			nodes = append(nodes, Node{Name: n.Name, ControlPlane: n.Role == target.ControlPlane, IP: n.Address, Endpoint: n.Endpoint, Config: n.Config})

			if n.Name == env.BootstrapNode {
				boot = n.Address
			}
		}

		cfg, err := copyConfig(env.Talosconfig)
		if err != nil {
			return err
		}

		userErr = bootstrap(ctx, cfg, nodes, boot)

		if userErr == nil && env.UpgradeTo != "" && opts.Upgrade != nil {
			userErr = opts.Upgrade(ctx, cfg, nodes, env.UpgradeTo)
		}

		return userErr
	}}

	// A run the host stalled through says nothing of the bootstrap: made
	// again, as the suite does (a void result after VoidRuns is Void).
	var err error

	res := UnlessVoid(func() *result.Result {
		var res *result.Result

		res, err = harness.Run(ctx, run, harness.Options{Target: sim.Target{}, Seed: seed, Orchestrator: orch, UntilConverged: true})

		return res
	}, nil)
	if err != nil && harness.IsInputError(err) {
		return CertifyResult{}, err
	}

	if ctx.Err() != nil {
		return CertifyResult{}, ctx.Err()
	}

	if opts.ReportDir != "" {
		if _, werr := reports.Write(filepath.Join(opts.ReportDir, sc.Name, fmt.Sprintf("seed-%d", seed)), res); werr != nil {
			return CertifyResult{}, werr
		}
	}

	r := CertifyResult{Scenario: sc.Name, Seed: seed, Outcome: reports.Classify(res), Expected: sc.Certify.Expected, Err: userErr}

	for _, d := range res.Diagnoses {
		r.Diagnoses = append(r.Diagnoses, d.Code)
	}

	if err != nil {
		r.Err = err
	}

	return r, nil
}

// certifyScenarios loads the named scenarios, or every built-in certify
// runs here.
func certifyScenarios(names []string, upgrades bool) ([]*scenario.Scenario, error) {
	named := len(names) > 0
	if !named {
		names = scenarios.Names()
	}

	var out []*scenario.Scenario

	for _, name := range names {
		sc, err := loadScenario(name)
		if err != nil {
			return nil, err
		}

		switch {
		case sc.Certify.Skip != "" && named:
			return nil, fmt.Errorf("%s: certify skips it: %s", name, sc.Certify.Skip)
		case sc.Certify.Skip != "":
			continue
		case sc.Certify.Expected == "":
			return nil, fmt.Errorf("%s: it does not say what a good bootstrap does there (certify.expected)", name)
		case sc.Orchestrator.UpgradeTo != "" && !upgrades && named:
			return nil, fmt.Errorf("%s: it upgrades every node after the bootstrap: set CertifyOptions.Upgrade", name)
		case sc.Orchestrator.UpgradeTo != "" && !upgrades:
			continue
		case sc.Cluster.Kubernetes && !named && sim.KubernetesAvailable() != nil:
			continue
		}

		out = append(out, sc)
	}

	if len(out) == 0 {
		return nil, errors.New("no scenario to certify against")
	}

	return out, nil
}

func loadScenario(name string) (*scenario.Scenario, error) {
	if data, file, err := scenarios.Read(name); err == nil {
		return chaos.Parse(file, data)
	}

	return chaos.Load(name)
}
