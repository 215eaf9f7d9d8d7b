// Package shard splits the (scenario, seed) pairs of a hunt, a night or a
// certification between machines that run independently — the jobs of a CI
// matrix, the pods of a Kubernetes Indexed Job — and says which pairs each
// must have run, so that `talchaos merge` can check a shard's output is whole.
//
// The split is a pure function of the pairs and the shard: the scenario names
// and the seeds are sorted first, so the same flags in any order, on any
// machine, give every shard the same pairs. The pairs are dealt out round
// robin in scenario-major order: pair i goes to shard i mod N. Every pair is
// in exactly one shard; the shards' sizes differ by at most one; and since a
// scenario's seeds are consecutive pairs, each scenario's seeds are spread
// over the shards too (their counts differing by at most one), so a slow
// scenario (a Kubernetes one, the 30-minute join timeout) slows every shard
// alike instead of one.
package shard

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/strictjson"
)

// MaxCount bounds the shards of a run: far more machines than anyone's
// night needs, few enough that a count given by mistake (a seed, a year)
// is refused rather than obeyed.
const MaxCount = 1000

// Shard is the part of a run one machine does: shard Index of Count,
// counted from 1. The zero Shard is the whole run.
type Shard struct {
	Index, Count int
}

// Whole reports whether s is the whole run (no sharding asked for).
func (s Shard) Whole() bool { return s.Count == 0 }

// String is "K/N", as --shard takes it ("" for the whole run).
func (s Shard) String() string {
	if s.Whole() {
		return ""
	}

	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Parse reads "K/N": shard K of N, 1 <= K <= N <= MaxCount.
func Parse(text string) (Shard, error) {
	k, n, ok := strings.Cut(strings.TrimSpace(text), "/")
	if !ok {
		return Shard{}, errors.New("want K/N: shard K of N, counted from 1 (e.g. 2/4)")
	}

	index, err := strconv.Atoi(strings.TrimSpace(k))
	if err != nil {
		return Shard{}, fmt.Errorf("K %s is not a whole number", strconv.Quote(k))
	}

	count, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil {
		return Shard{}, fmt.Errorf("N %s is not a whole number", strconv.Quote(n))
	}

	return checked(index, count)
}

func checked(index, count int) (Shard, error) {
	switch {
	case count < 1 || count > MaxCount:
		return Shard{}, fmt.Errorf("N is %d: want 1 to %d shards", count, MaxCount)
	case index < 1 || index > count:
		return Shard{}, fmt.Errorf("K is %d: want 1 to %d (shards are counted from 1)", index, count)
	}

	return Shard{Index: index, Count: count}, nil
}

// Environment variables FromEnv reads, for engines that cannot put the shard
// in a command line: TALCHAOS_SHARD=K/N, or TALCHAOS_SHARDS=N beside the
// 0-based index a Kubernetes Indexed Job gives each pod
// (JOB_COMPLETION_INDEX; the Job's completion count is not in the pod's
// environment, so N is set in the pod template).
const (
	EnvShard  = "TALCHAOS_SHARD"
	EnvShards = "TALCHAOS_SHARDS"
	EnvIndex  = "JOB_COMPLETION_INDEX"
)

// FromEnv is the shard the environment asks for (getenv reads it): the
// zero Shard when neither EnvShard nor EnvShards is set. Setting both is an
// error, and so is EnvShards without EnvIndex; errors name the variable.
func FromEnv(getenv func(string) string) (Shard, error) {
	one, count := getenv(EnvShard), getenv(EnvShards)

	switch {
	case one != "" && count != "":
		return Shard{}, fmt.Errorf("%s and %s are both set: set one (%s=K/N, or %s=N with %s)", EnvShard, EnvShards, EnvShard, EnvShards, EnvIndex)
	case one != "":
		s, err := Parse(one)
		if err != nil {
			return Shard{}, fmt.Errorf("%s=%s: %w", EnvShard, strconv.Quote(one), err)
		}

		return s, nil
	case count == "":
		return Shard{}, nil
	}

	n, err := strconv.Atoi(strings.TrimSpace(count))
	if err != nil {
		return Shard{}, fmt.Errorf("%s=%s: not a whole number", EnvShards, strconv.Quote(count))
	}

	index := getenv(EnvIndex)
	if index == "" {
		return Shard{}, fmt.Errorf("%s=%s is set but %s is not (it is the index a Kubernetes Indexed Job gives each pod; elsewhere set %s=K/N)", EnvShards, count, EnvIndex, EnvShard)
	}

	i, err := strconv.Atoi(strings.TrimSpace(index))
	if err != nil {
		return Shard{}, fmt.Errorf("%s=%s: not a whole number", EnvIndex, strconv.Quote(index))
	}

	s, err := checked(i+1, n)
	if err != nil {
		return Shard{}, fmt.Errorf("%s=%s with %s=%s (shard %d of %d): %w", EnvIndex, index, EnvShards, count, i+1, n, err)
	}

	return s, nil
}

// Pair is one run: a scenario at a seed.
type Pair struct {
	Scenario string
	Seed     int64
}

// Plan is a sharded run: the whole run's scenarios and seeds, sorted, and
// the shard this machine does.
type Plan struct {
	Shard     Shard
	Scenarios []string
	Seeds     []int64
	// TimeScale is the time scale every scenario runs at (--time-scale);
	// 0: each scenario's own.
	TimeScale float64
}

// NewPlan is the plan of shard s over scenarios × seeds (copied, sorted).
func NewPlan(s Shard, scenarios []string, seeds []int64) Plan {
	p := Plan{Shard: s, Scenarios: slices.Clone(scenarios), Seeds: slices.Clone(seeds)}
	slices.Sort(p.Scenarios)
	slices.Sort(p.Seeds)

	return p
}

// Pairs are the pairs this shard runs (every pair for the whole run), in
// scenario-major order.
func (p Plan) Pairs() []Pair {
	var out []Pair

	i := 0

	for _, sc := range p.Scenarios {
		for _, seed := range p.Seeds {
			if p.Shard.Whole() || i%p.Shard.Count == p.Shard.Index-1 {
				out = append(out, Pair{Scenario: sc, Seed: seed})
			}

			i++
		}
	}

	return out
}

// SeedsOf are this shard's seeds of scenario name, ascending.
func (p Plan) SeedsOf(name string) []int64 {
	var out []int64

	for _, pr := range p.Pairs() {
		if pr.Scenario == name {
			out = append(out, pr.Seed)
		}
	}

	return out
}

// Stamp says which part of which run an output file is: written into a
// shard's ledger.json, hunt.json and certify.json beside the talchaos build
// that wrote it, so that merge can refuse shards of different runs.
type Stamp struct {
	Index int `json:"index"` // this shard, counted from 1
	Count int `json:"count"` // of how many
	// Seeds and Scenarios are the whole run's (every shard's alike),
	// sorted: what decides every shard's pairs.
	Seeds     []int64  `json:"seeds"`
	Scenarios []string `json:"scenarios"`
	// TimeScale is the run's --time-scale (0: each scenario's own): shards
	// at different scales are not parts of one run.
	TimeScale float64 `json:"timeScale,omitempty"`
}

// Stamp is the plan's stamp; nil for the whole run, which has none.
func (p Plan) Stamp() *Stamp {
	if p.Shard.Whole() {
		return nil
	}

	return &Stamp{Index: p.Shard.Index, Count: p.Shard.Count, Seeds: slices.Clone(p.Seeds), Scenarios: slices.Clone(p.Scenarios), TimeScale: p.TimeScale}
}

// Plan is the plan a stamp was written from.
func (s *Stamp) Plan() Plan {
	return Plan{Shard: Shard{Index: s.Index, Count: s.Count}, Scenarios: s.Scenarios, Seeds: s.Seeds, TimeScale: s.TimeScale}
}

// Limits of a stamp read back: the seeds and scenarios a run can have.
const (
	MaxSeeds     = 10_000
	MaxScenarios = 10_000
)

// Check records in p, at path, what makes a stamp read from a file unusable:
// a shard outside 1..count or a count outside 1..MaxCount; no seeds or
// scenarios, too many, one given twice, out of order (Plan sorts them, so a
// stamp it wrote is sorted), an empty scenario name, or a time scale
// outside 1 to scenario.MaxTimeScale.
func (s *Stamp) Check(p *strictjson.Problems, path string) {
	CheckTimeScale(p, strictjson.Key(path, "timeScale"), s.TimeScale)

	switch {
	case s.Count < 1 || s.Count > MaxCount:
		p.Addf(strictjson.Key(path, "count"), "is %d: want 1 to %d shards", s.Count, MaxCount)
	case s.Index < 1 || s.Index > s.Count:
		p.Addf(strictjson.Key(path, "index"), "is %d: want 1 to %d (count), counted from 1", s.Index, s.Count)
	}

	checkSorted(p, strictjson.Key(path, "seeds"), s.Seeds, MaxSeeds, func(v int64) string { return strconv.FormatInt(v, 10) })
	checkSorted(p, strictjson.Key(path, "scenarios"), s.Scenarios, MaxScenarios, strictjson.Quote)

	for i, name := range s.Scenarios {
		if name == "" {
			p.Addf(strictjson.Index(strictjson.Key(path, "scenarios"), i), "is empty")
		}
	}
}

func checkSorted[T cmp.Ordered](p *strictjson.Problems, path string, list []T, most int, show func(T) string) {
	switch {
	case len(list) == 0:
		p.Addf(path, "is empty: a run has at least one")

		return
	case len(list) > most:
		p.Addf(path, "holds %d: at most %d", len(list), most)

		return
	}

	for i := 1; i < len(list); i++ {
		switch c := cmp.Compare(list[i-1], list[i]); {
		case c == 0:
			p.Addf(strictjson.Index(path, i), "%s is listed twice", show(list[i]))

			return
		case c > 0:
			p.Addf(strictjson.Index(path, i), "%s comes after %s: the list is written sorted", show(list[i]), show(list[i-1]))

			return
		}
	}
}

// SameRun says how two stamps differ as runs, "" when they are shards of
// the same run (same count, seeds and scenarios): "their seeds differ: 1-4
// and 1-3,5", for a message that names both files in that order.
func (s *Stamp) SameRun(o *Stamp) string {
	switch {
	case s.Count != o.Count:
		return fmt.Sprintf("they are of %d and of %d shards", s.Count, o.Count)
	case s.TimeScale != o.TimeScale:
		return fmt.Sprintf("they ran at time scales %s and %s", ScaleText(s.TimeScale), ScaleText(o.TimeScale))
	case !slices.Equal(s.Seeds, o.Seeds):
		return fmt.Sprintf("their seeds differ: %s and %s", Ranges(s.Seeds), Ranges(o.Seeds))
	case !slices.Equal(s.Scenarios, o.Scenarios):
		var parts []string
		if only := missingFrom(s.Scenarios, o.Scenarios); only != "" {
			parts = append(parts, only+" only in the first")
		}

		if only := missingFrom(o.Scenarios, s.Scenarios); only != "" {
			parts = append(parts, only+" only in the second")
		}

		return "their scenarios differ: " + strings.Join(parts, ", ")
	}

	return ""
}

// missingFrom names a's scenarios that b lacks (at most five).
func missingFrom(a, b []string) string {
	var out []string

	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, strictjson.Quote(n))
		}
	}

	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("%d more", len(out)-5))
	}

	return strings.Join(out, ", ")
}

// Ranges writes sorted seeds as --seeds takes them: "1-20", "1-3,7".
func Ranges(seeds []int64) string {
	var parts []string

	for i := 0; i < len(seeds); {
		j := i
		for j+1 < len(seeds) && seeds[j+1] == seeds[j]+1 {
			j++
		}

		if j == i {
			parts = append(parts, strconv.FormatInt(seeds[i], 10))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", seeds[i], seeds[j]))
		}

		i = j + 1
	}

	return strings.Join(parts, ",")
}

// CheckTimeScale records in p, at path, a run's time scale read from a file
// that is neither 0 (each scenario's own) nor 1 to scenario.MaxTimeScale.
func CheckTimeScale(p *strictjson.Problems, path string, scale float64) {
	if scale != 0 && !(scale >= 1 && scale <= scenario.MaxTimeScale) {
		p.Addf(path, "is %v: want 1 to %d (--time-scale), or none for each scenario's own", scale, scenario.MaxTimeScale)
	}
}

// ScaleText says a run's time scale: "30x", or "each scenario's own" for 0.
func ScaleText(scale float64) string {
	if scale == 0 {
		return "each scenario's own"
	}

	return strconv.FormatFloat(scale, 'g', -1, 64) + "x"
}
