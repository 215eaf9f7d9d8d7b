package shrink

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/scenario"
)

// padded reproduces its outcome through one fault (the api-fail on cp2) on
// three control planes; the rest is padding a shrink must remove.
const padded = `apiVersion: talchaos/v1
kind: Scenario
name: padded
# the comment stays
talos: v1.12
timeScale: 60
cluster:
  controlPlanes: 3
  workers: 2
  nodes:
    cp3:
      etcdImagePull: 2m
  workload:
    writesPerSecond: 40
    valueBytes: 512
orchestrator:
  name: naive
faults:
  - name: slow-api
    kind: latency
    node: cp1
    port: talos-api
    latency: 20ms
    at: 30s
    for: 2m
  - name: cp2-apply-fails
    kind: api-fail
    node: cp2
    rpc: ApplyConfiguration
    code: Unavailable
    count: 2
    at: 1m
  - name: thin-peer
    kind: bandwidth
    node: cp3
    port: etcd-peer
    rateKBps: 512
    at: 0s
    for: 1m
  - name: crash
    kind: crash-etcd
    node: cp1
    at: 4m
expect:
  within: 10m
  converged: false
`

// reproduces is a model of the real runs: the outcome needs the api-fail on
// cp2 and three control planes, and an api-fail that starts after 40s comes
// too late for the apply.
func reproduces(sc *scenario.Scenario) bool {
	if sc.Cluster.ControlPlanes < 3 {
		return false
	}

	for _, f := range sc.Faults {
		if f.Name == "cp2-apply-fails" && (f.At == nil || f.At.Duration <= 40*time.Second) {
			return true
		}
	}

	return false
}

func TestShrinkRemovesPadding(t *testing.T) {
	var seen []string

	res, err := Shrink(t.Context(), []byte(padded), Options{
		File: "padded.yaml", Rate: 1, Parse: chaos.Parse,
		Test: func(_ context.Context, sc *scenario.Scenario) (float64, error) {
			if reproduces(sc) {
				return 1, nil
			}

			return 0.25, nil
		},
		OnStep: func(s Step) { seen = append(seen, s.What) },
	})
	if err != nil {
		t.Fatal(err)
	}

	sc, err := chaos.Parse("shrunk.yaml", res.File)
	if err != nil {
		t.Fatalf("the minimal file does not parse: %v\n%s", err, res.File)
	}

	if names := faultNamesOf(sc); !slices.Equal(names, []string{"cp2-apply-fails"}) {
		t.Errorf("faults %v, want only cp2-apply-fails", names)
	}

	if sc.Cluster.Workers != 0 || sc.Cluster.ControlPlanes != 3 || len(sc.Cluster.Nodes) != 0 || sc.Cluster.Workload.WritesPerSecond != 0 {
		t.Errorf("cluster %+v, want 3 control planes and nothing else", sc.Cluster)
	}

	if at := sc.Faults[0].At; at == nil || at.Duration != 0 {
		t.Errorf("api-fail at %v, want 0s (a shorter delay reproduces)", at)
	}

	if !strings.Contains(string(res.File), "# the comment stays") {
		t.Errorf("the minimal file lost the original's comments:\n%s", res.File)
	}

	for _, want := range []string{"workers 2 → 0", "drop the settings of node cp3", "drop the workload"} {
		if !slices.Contains(seen, want) {
			t.Errorf("no step %q in %q", want, seen)
		}
	}

	for _, s := range res.Steps {
		if s.Kept != (s.Rate == 1) {
			t.Errorf("step %+v: kept must mean the rate held", s)
		}
	}

	if !slices.ContainsFunc(res.Steps, func(s Step) bool { return !s.Kept && strings.HasPrefix(s.What, "control planes 3 → ") }) {
		t.Errorf("removing control planes was not tried (and refused): %q", seen)
	}
}

func faultNamesOf(sc *scenario.Scenario) []string {
	var out []string
	for _, f := range sc.Faults {
		out = append(out, f.Name)
	}

	return out
}

func TestShrinkStops(t *testing.T) {
	always := func(context.Context, *scenario.Scenario) (float64, error) { return 1, nil }

	t.Run("at MaxTries", func(t *testing.T) {
		res, err := Shrink(t.Context(), []byte(padded), Options{File: "p.yaml", Rate: 1, MaxTries: 2, Parse: chaos.Parse, Test: always})
		if err != nil || !res.Exhausted || len(res.Steps) != 2 {
			t.Errorf("err %v, exhausted %t after %d steps, want exhausted after 2", err, res.Exhausted, len(res.Steps))
		}
	})

	t.Run("when interrupted, with the best so far", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())

		res, err := Shrink(ctx, []byte(padded), Options{File: "p.yaml", Rate: 1, Parse: chaos.Parse, Test: func(ctx context.Context, sc *scenario.Scenario) (float64, error) {
			cancel()

			return 1, nil
		}})
		if err != nil || !res.Interrupted || len(res.Kept()) != 1 {
			t.Fatalf("err %v, interrupted %t, kept %v", err, res.Interrupted, res.Kept())
		}

		if _, err := chaos.Parse("p.yaml", res.File); err != nil {
			t.Errorf("the best so far does not parse: %v", err)
		}
	})

	t.Run("on the test's error", func(t *testing.T) {
		boom := errors.New("boom")

		_, err := Shrink(t.Context(), []byte(padded), Options{File: "p.yaml", Rate: 1, Parse: chaos.Parse, Test: func(context.Context, *scenario.Scenario) (float64, error) { return 0, boom }})
		if !errors.Is(err, boom) {
			t.Errorf("err %v, want boom", err)
		}
	})

	t.Run("passing over candidates the target refuses", func(t *testing.T) {
		res, err := Shrink(t.Context(), []byte(padded), Options{File: "p.yaml", Rate: 1, Parse: chaos.Parse, Test: func(context.Context, *scenario.Scenario) (float64, error) {
			return 0, ErrInvalid
		}})
		if err != nil || len(res.Steps) != 0 || string(res.File) != padded {
			t.Errorf("err %v, %d steps, want none and the file unchanged", err, len(res.Steps))
		}
	})

	for _, rate := range []float64{0, -1, 1.5} {
		if _, err := Shrink(t.Context(), []byte(padded), Options{Rate: rate, Parse: chaos.Parse, Test: always}); err == nil {
			t.Errorf("rate %g accepted", rate)
		}
	}
}
