package shard

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/strictjson"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Shard
		err  string
	}{
		{"1/1", Shard{1, 1}, ""},
		{"2/4", Shard{2, 4}, ""},
		{" 4 / 4 ", Shard{4, 4}, ""},
		{"1000/1000", Shard{1000, 1000}, ""},
		{"0/4", Shard{}, "K is 0"},
		{"5/4", Shard{}, "K is 5"},
		{"1/0", Shard{}, "N is 0"},
		{"1/1001", Shard{}, "N is 1001"},
		{"-1/4", Shard{}, "K is -1"},
		{"2", Shard{}, "want K/N"},
		{"a/4", Shard{}, `K "a"`},
		{"1/4/5", Shard{}, `N "4/5"`},
		{"", Shard{}, "want K/N"},
	} {
		got, err := Parse(tc.in)
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}

		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Parse(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
		}
	}
}

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Shard
		err  string
	}{
		{"nothing", nil, Shard{}, ""},
		{"an index alone is another job's business", map[string]string{EnvIndex: "3"}, Shard{}, ""},
		{"K/N", map[string]string{EnvShard: "3/4"}, Shard{3, 4}, ""},
		{"indexed job", map[string]string{EnvShards: "4", EnvIndex: "0"}, Shard{1, 4}, ""},
		{"indexed job, last", map[string]string{EnvShards: "4", EnvIndex: "3"}, Shard{4, 4}, ""},
		{"index past the count", map[string]string{EnvShards: "4", EnvIndex: "4"}, Shard{}, "JOB_COMPLETION_INDEX=4 with TALCHAOS_SHARDS=4 (shard 5 of 4)"},
		{"count without index", map[string]string{EnvShards: "4"}, Shard{}, "JOB_COMPLETION_INDEX is not"},
		{"both", map[string]string{EnvShards: "4", EnvShard: "1/4", EnvIndex: "0"}, Shard{}, "both set"},
		{"bad K/N", map[string]string{EnvShard: "4"}, Shard{}, `TALCHAOS_SHARD="4": want K/N`},
		{"bad count", map[string]string{EnvShards: "four", EnvIndex: "0"}, Shard{}, `TALCHAOS_SHARDS="four"`},
		{"bad index", map[string]string{EnvShards: "4", EnvIndex: "x"}, Shard{}, `JOB_COMPLETION_INDEX="x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromEnv(func(k string) string { return tc.env[k] })
			if tc.err == "" && (err != nil || got != tc.want) {
				t.Errorf("= %v, %v; want %v", got, err, tc.want)
			}

			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("= %v, %v; want an error with %q", got, err, tc.err)
			}
		})
	}
}

// Every pair is in exactly one shard, whatever the order the scenarios and
// seeds were given in; the shards' sizes differ by at most one, and so do
// each scenario's seed counts across the shards.
func TestPlanPartitionsEvenly(t *testing.T) {
	names := []string{"too-many-learners", "happy-path", "invalid-config", "pki-mismatch", "quorum-lost"}
	reversed := slices.Clone(names)
	slices.Reverse(reversed)

	for _, seeds := range [][]int64{{1, 2, 3, 4}, {7}, {20, 3, 5, 1, 9, 11, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}} {
		for _, n := range []int{1, 2, 3, 4, 7, 40} {
			t.Run(fmt.Sprintf("%d seeds in %d shards", len(seeds), n), func(t *testing.T) {
				whole := NewPlan(Shard{}, names, seeds).Pairs()
				if len(whole) != len(names)*len(seeds) {
					t.Fatalf("the whole run has %d pairs, want %d", len(whole), len(names)*len(seeds))
				}

				owner := map[Pair]int{}
				sizes := make([]int, n)
				perScenario := map[string][]int{}

				for k := 1; k <= n; k++ {
					pairs := NewPlan(Shard{k, n}, names, seeds).Pairs()

					// Given in another order, the same pairs.
					backwards := slices.Clone(seeds)
					slices.Reverse(backwards)

					if other := NewPlan(Shard{k, n}, reversed, backwards).Pairs(); !slices.Equal(pairs, other) {
						t.Errorf("shard %d/%d depends on the order of the flags: %v vs %v", k, n, pairs, other)
					}

					for _, p := range pairs {
						if j, dup := owner[p]; dup {
							t.Errorf("%v is in shards %d and %d", p, j, k)
						}

						owner[p] = k

						if perScenario[p.Scenario] == nil {
							perScenario[p.Scenario] = make([]int, n)
						}

						perScenario[p.Scenario][k-1]++
					}

					sizes[k-1] = len(pairs)
				}

				if len(owner) != len(whole) {
					t.Errorf("the shards hold %d pairs, the whole run %d", len(owner), len(whole))
				}

				if spread(sizes) > 1 {
					t.Errorf("shard sizes %v differ by more than one", sizes)
				}

				for name, counts := range perScenario {
					if spread(counts) > 1 {
						t.Errorf("%s's seeds per shard %v differ by more than one", name, counts)
					}
				}
			})
		}
	}
}

func spread(v []int) int { return slices.Max(v) - slices.Min(v) }

// The split is fixed: a shard run by another talchaos build of the same
// version must pick the same pairs, so a change to it must be deliberate.
func TestPlanIsRoundRobinScenarioMajor(t *testing.T) {
	// a1 a2 b1 b2 dealt to shards 1 2 3 1.
	p := NewPlan(Shard{1, 3}, []string{"b", "a"}, []int64{2, 1})

	want := []Pair{{"a", 1}, {"b", 2}}
	if got := p.Pairs(); !slices.Equal(got, want) {
		t.Errorf("shard 1/3 of a,b x 1,2 = %v, want %v", got, want)
	}

	if got := p.SeedsOf("b"); !slices.Equal(got, []int64{2}) {
		t.Errorf("SeedsOf(b) = %v", got)
	}

	if got := NewPlan(Shard{3, 3}, []string{"a", "b"}, []int64{1, 2}).SeedsOf("a"); len(got) != 0 {
		t.Errorf("shard 3/3 runs a at %v, want none", got)
	}
}

func TestStampCheck(t *testing.T) {
	good := Stamp{Index: 2, Count: 4, Seeds: []int64{1, 2, 3}, Scenarios: []string{"a", "b"}}

	for _, tc := range []struct {
		name   string
		mutate func(s *Stamp)
		want   string
	}{
		{"good", func(*Stamp) {}, ""},
		{"index 0", func(s *Stamp) { s.Index = 0 }, "shard.index: is 0"},
		{"index past count", func(s *Stamp) { s.Index = 5 }, "shard.index: is 5"},
		{"count too large", func(s *Stamp) { s.Count = MaxCount + 1 }, "shard.count: is 1001"},
		{"no seeds", func(s *Stamp) { s.Seeds = nil }, "shard.seeds: is empty"},
		{"seed twice", func(s *Stamp) { s.Seeds = []int64{1, 1} }, "shard.seeds[1]: 1 is listed twice"},
		{"unsorted", func(s *Stamp) { s.Scenarios = []string{"b", "a"} }, `shard.scenarios[1]: "a" comes after "b"`},
		{"empty name", func(s *Stamp) { s.Scenarios = []string{"", "a"} }, "shard.scenarios[0]: is empty"},
		{"too many seeds", func(s *Stamp) { s.Seeds = make([]int64, MaxSeeds+1) }, "shard.seeds: holds 10001"},
		{"time scale", func(s *Stamp) { s.TimeScale = 30 }, ""},
		{"time scale below 1", func(s *Stamp) { s.TimeScale = 0.5 }, "shard.timeScale: is 0.5: want 1 to 10000"},
		{"time scale too large", func(s *Stamp) { s.TimeScale = 10001 }, "shard.timeScale: is 10001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.mutate(&s)

			var p strictjson.Problems
			s.Check(&p, "shard")

			got := ""
			if errs := p.Errs(); len(errs) > 0 {
				got = errs[0].Error()
			}

			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("problems %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSameRun(t *testing.T) {
	a := &Stamp{Index: 1, Count: 2, Seeds: []int64{1, 2, 3, 4}, Scenarios: []string{"x", "y"}}

	for _, tc := range []struct {
		other *Stamp
		want  string
	}{
		{&Stamp{Index: 2, Count: 2, Seeds: []int64{1, 2, 3, 4}, Scenarios: []string{"x", "y"}}, ""},
		{&Stamp{Index: 2, Count: 3, Seeds: []int64{1, 2, 3, 4}, Scenarios: []string{"x", "y"}}, "they are of 2 and of 3 shards"},
		{&Stamp{Index: 2, Count: 2, Seeds: []int64{1, 2, 3, 5}, Scenarios: []string{"x", "y"}}, "their seeds differ: 1-4 and 1-3,5"},
		{&Stamp{Index: 2, Count: 2, Seeds: []int64{1, 2, 3, 4}, Scenarios: []string{"x", "z"}}, `their scenarios differ: "y" only in the first, "z" only in the second`},
		{&Stamp{Index: 2, Count: 2, Seeds: []int64{1, 2, 3, 4}, Scenarios: []string{"x", "y"}, TimeScale: 30}, "they ran at time scales each scenario's own and 30x"},
	} {
		if got := a.SameRun(tc.other); !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("SameRun(%+v) = %q, want %q", tc.other, got, tc.want)
		}
	}
}

func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		in   []int64
		want string
	}{
		{[]int64{1, 2, 3}, "1-3"},
		{[]int64{1, 3, 4, 7}, "1,3-4,7"},
		{[]int64{-2, -1}, "-2--1"},
		{nil, ""},
	} {
		if got := Ranges(tc.in); got != tc.want {
			t.Errorf("Ranges(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
