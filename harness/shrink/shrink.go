// Package shrink minimises a scenario that reproduces an outcome, by delta
// debugging (Zeller and Hildebrandt's ddmin for the list of faults, then one
// simplification at a time for the rest): drop faults, per-node settings and
// config patches, remove workers and control planes, lower the workload,
// shorten fault delays and windows. A reduction is kept only if the reduced
// scenario still reproduces the outcome at the required rate, as the caller's
// Test measures over its seeds; passes repeat until none is kept.
//
// Reductions edit the scenario file's YAML tree, not a re-marshalled struct,
// so the minimal file keeps the original's comments, order and wording, and
// every candidate is parsed and validated as a file a user wrote would be (a
// reduction that leaves a fault naming a removed node is never run).
package shrink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/talchaos/talchaos/harness/scenario"
)

// Test measures a candidate: the fraction of the seeds on which it
// reproduced the outcome. An error wrapping ErrInvalid rejects the candidate
// without counting it (the target refused it); any other error ends the
// shrink.
type Test func(ctx context.Context, sc *scenario.Scenario) (rate float64, err error)

// ErrInvalid marks a candidate the target cannot run.
var ErrInvalid = errors.New("candidate cannot run")

// Parser parses a scenario file (chaos.Parse, with the fault catalogue).
type Parser func(file string, data []byte) (*scenario.Scenario, error)

// Step is one reduction tried.
type Step struct {
	// What the reduction removed or changed, as a sentence fragment:
	// "drop fault slow-peer (latency)", "workers 2 → 0".
	What string `json:"what"`
	// Kept is whether the reduced scenario still reproduced the outcome.
	Kept bool    `json:"kept"`
	Rate float64 `json:"rate"`
}

// Result is a finished (or interrupted) shrink.
type Result struct {
	// File is the minimal scenario file.
	File []byte `json:"-"`
	// Steps are the reductions tried, in order.
	Steps []Step `json:"steps"`
	// Interrupted is set when ctx ended before the passes did: File is then
	// the smallest scenario found so far.
	Interrupted bool `json:"interrupted,omitempty"`
	// Exhausted is set when MaxTries ended the passes.
	Exhausted bool `json:"exhausted,omitempty"`
}

// Kept lists the reductions that were kept.
func (r *Result) Kept() []Step {
	return slices.DeleteFunc(slices.Clone(r.Steps), func(s Step) bool { return !s.Kept })
}

// Options drive a shrink.
type Options struct {
	// File names the scenario in parse errors.
	File string
	// Rate is the fraction of seeds a reduction must still reproduce the
	// outcome on, 0 < Rate ≤ 1.
	Rate float64
	// MaxTries bounds the candidates run (0: 200).
	MaxTries int
	Parse    Parser
	Test     Test
	// OnStep, when set, is told of every step as it is decided.
	OnStep func(Step)
}

// Shrink minimises the scenario file src.
func Shrink(ctx context.Context, src []byte, opts Options) (*Result, error) {
	if opts.Rate <= 0 || opts.Rate > 1 {
		return nil, fmt.Errorf("rate %g: want 0 < rate <= 1", opts.Rate)
	}

	if opts.MaxTries == 0 {
		opts.MaxTries = 200
	}

	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", opts.File, err)
	}

	if _, err := opts.Parse(opts.File, src); err != nil {
		return nil, err
	}

	s := &shrinker{opts: opts, best: &doc, res: &Result{File: src}}

	err := s.run(ctx)

	switch {
	case ctx.Err() != nil:
		s.res.Interrupted = true
	case errors.Is(err, errExhausted):
		s.res.Exhausted = true
	case err != nil:
		return s.res, err
	}

	return s.res, nil
}

var errExhausted = errors.New("tries exhausted")

type shrinker struct {
	opts  Options
	best  *yaml.Node
	res   *Result
	tries int
}

// candidate is one reduction: what it does, and the edit on a copy of the
// current document (false when it does not apply).
type candidate struct {
	what string
	edit func(root *yaml.Node) bool
}

func (s *shrinker) run(ctx context.Context) error {
	for {
		kept := false

		for _, pass := range []func(context.Context) (bool, error){s.faults, s.simplifications} {
			k, err := pass(ctx)
			if err != nil {
				return err
			}

			kept = kept || k
		}

		if !kept {
			return nil
		}
	}
}

// faults is ddmin over the faults: remove chunks of the list, from all of it
// to one at a time, keeping every removal that reproduces.
func (s *shrinker) faults(ctx context.Context) (bool, error) {
	keptAny := false

	for chunks := 1; ; {
		n := len(items(seq(root(s.best), "faults")))
		if n == 0 || chunks > n {
			return keptAny, nil
		}

		kept := false

		for i := range chunks {
			lo, hi := i*n/chunks, (i+1)*n/chunks
			names := faultNames(items(seq(root(s.best), "faults"))[lo:hi])

			k, err := s.try(ctx, candidate{
				what: "drop " + plural(len(names), "fault") + " " + strings.Join(names, ", "),
				edit: func(r *yaml.Node) bool {
					f := seq(r, "faults")
					if f == nil {
						return false
					}

					if f.Content = slices.Delete(f.Content, lo, hi); len(f.Content) == 0 {
						del(r, "faults")
					}

					return true
				},
			})
			if err != nil {
				return keptAny, err
			}

			if k {
				kept, keptAny = true, true

				break
			}
		}

		if kept {
			chunks = max(chunks-1, 1)

			continue
		}

		if chunks == n {
			return keptAny, nil
		}

		chunks = min(chunks*2, n)
	}
}

// simplifications tries every other reduction once, in order, against the
// current best.
func (s *shrinker) simplifications(ctx context.Context) (bool, error) {
	keptAny := false

	for _, gen := range []func(*yaml.Node) []candidate{nodeSettings, configPatches, nodeCounts, workload, faultTimes} {
		// Candidates are worked out from the scenario as it is: after one is
		// kept, the rest are worked out again (a "workers 2 → 1" drawn up
		// before "workers 2 → 0" was kept would add one back).
		for again := true; again; {
			again = false

			for _, c := range gen(root(s.best)) {
				k, err := s.try(ctx, c)
				if err != nil {
					return keptAny, err
				}

				if k {
					keptAny, again = true, true

					break
				}
			}
		}
	}

	return keptAny, nil
}

// try runs a candidate against the current best and keeps it if it
// reproduces. A candidate whose edit does not apply, that does not parse,
// or that the target refuses is passed over silently.
func (s *shrinker) try(ctx context.Context, c candidate) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}

	next := clone(s.best)
	if !c.edit(root(next)) {
		return false, nil
	}

	data, err := yaml.Marshal(next)
	if err != nil {
		return false, nil //nolint:nilerr // a tree that does not print is not a candidate
	}

	sc, err := s.opts.Parse(s.opts.File, data)
	if err != nil {
		return false, nil //nolint:nilerr // not a valid scenario: not a candidate
	}

	if s.tries >= s.opts.MaxTries {
		return false, errExhausted
	}

	s.tries++

	rate, err := s.opts.Test(ctx, sc)
	if errors.Is(err, ErrInvalid) {
		return false, nil
	}

	if err != nil {
		return false, err
	}

	step := Step{What: c.what, Rate: rate, Kept: rate >= s.opts.Rate}
	s.res.Steps = append(s.res.Steps, step)

	if s.opts.OnStep != nil {
		s.opts.OnStep(step)
	}

	if step.Kept {
		s.best, s.res.File = next, data
	}

	return step.Kept, nil
}

// nodeSettings drops each node's own settings (cluster.nodes.NAME).
func nodeSettings(r *yaml.Node) []candidate {
	var out []candidate

	nodes := mapping(get(mapping(get(r, "cluster")), "nodes"))
	if nodes == nil {
		return nil
	}

	for i := 0; i+1 < len(nodes.Content); i += 2 {
		name := nodes.Content[i].Value
		out = append(out, candidate{what: "drop the settings of node " + name, edit: func(r *yaml.Node) bool {
			return del(mapping(get(mapping(get(r, "cluster")), "nodes")), name)
		}})
	}

	return out
}

// configPatches drops each config patch.
func configPatches(r *yaml.Node) []candidate {
	patches := seq(mapping(get(r, "cluster")), "configPatches")
	if patches == nil {
		return nil
	}

	out := make([]candidate, 0, len(patches.Content))

	for i := range patches.Content {
		out = append(out, candidate{what: fmt.Sprintf("drop config patch %d", i+1), edit: func(r *yaml.Node) bool {
			p := seq(mapping(get(r, "cluster")), "configPatches")
			if p == nil || i >= len(p.Content) {
				return false
			}

			p.Content = slices.Delete(p.Content, i, i+1)

			return true
		}})
	}

	return out
}

// nodeCounts removes workers (to none, to half, one) and control planes (to
// one, to half, one).
func nodeCounts(r *yaml.Node) []candidate {
	var out []candidate

	for _, f := range []struct {
		key, what string
		floor     int
	}{{"workers", "workers", 0}, {"controlPlanes", "control planes", 1}} {
		n, ok := intAt(mapping(get(r, "cluster")), f.key)
		if !ok || n <= f.floor {
			continue
		}

		// The biggest reduction first: to the floor, to half, one less.
		for _, to := range ascending(f.floor, n/2, n-1) {
			if to < f.floor || to >= n {
				continue
			}

			out = append(out, candidate{what: fmt.Sprintf("%s %d → %d", f.what, n, to), edit: func(r *yaml.Node) bool {
				return setScalar(mapping(get(r, "cluster")), f.key, strconv.Itoa(to), "!!int")
			}})
		}
	}

	return out
}

// workload drops the simulated apiserver writes, or halves them.
func workload(r *yaml.Node) []candidate {
	w := mapping(get(mapping(get(r, "cluster")), "workload"))
	if w == nil {
		return nil
	}

	out := []candidate{{what: "drop the workload", edit: func(r *yaml.Node) bool { return del(mapping(get(r, "cluster")), "workload") }}}

	for _, key := range []string{"writesPerSecond", "valueBytes"} {
		n, ok := intAt(w, key)
		if !ok || n < 2 {
			continue
		}

		out = append(out, candidate{what: fmt.Sprintf("workload %s %d → %d", key, n, n/2), edit: func(r *yaml.Node) bool {
			return setScalar(mapping(get(mapping(get(r, "cluster")), "workload")), key, strconv.Itoa(n/2), "!!int")
		}})
	}

	return out
}

// faultTimes shortens each fault's delays (at, when.after, until.after: to
// none, then half) and windows (for: half).
func faultTimes(r *yaml.Node) []candidate {
	faults := seq(r, "faults")
	if faults == nil {
		return nil
	}

	var out []candidate

	for i, f := range faults.Content {
		name := faultNames([]*yaml.Node{f})[0]

		for _, path := range [][]string{{"at"}, {"when", "after"}, {"until", "after"}, {"for"}} {
			d, ok := durationAt(mapping(f), path)
			if !ok || d <= 0 {
				continue
			}

			var targets []time.Duration
			if path[0] != "for" {
				targets = append(targets, 0)
			}

			if half := (d / 2).Round(time.Second); half > 0 && half < d {
				targets = append(targets, half)
			}

			for _, to := range targets {
				out = append(out, candidate{
					what: fmt.Sprintf("fault %s %s %s → %s", name, strings.Join(path, "."), d, to),
					edit: func(r *yaml.Node) bool {
						fs := seq(r, "faults")
						if fs == nil || i >= len(fs.Content) {
							return false
						}

						m := mapping(fs.Content[i])
						for _, k := range path[:len(path)-1] {
							m = mapping(get(m, k))
						}

						return setScalar(m, path[len(path)-1], to.String(), "!!str")
					},
				})
			}
		}
	}

	return out
}

// ascending is the values in ascending order without repeats.
func ascending(vs ...int) []int {
	slices.Sort(vs)

	return slices.Compact(vs)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}

	return word + "s"
}

// faultNames are the faults' names, or their kind and position when unnamed.
func faultNames(fs []*yaml.Node) []string {
	out := make([]string, 0, len(fs))

	for _, f := range fs {
		m := mapping(f)

		name := scalar(get(m, "name"))
		kind := scalar(get(m, "kind"))

		switch {
		case name != "" && kind != "":
			out = append(out, name+" ("+kind+")")
		case name != "":
			out = append(out, name)
		default:
			out = append(out, kind)
		}
	}

	return out
}
