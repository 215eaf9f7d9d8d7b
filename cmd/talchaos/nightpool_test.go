package main

import (
	"fmt"
	"slices"
	"testing"
)

// A night's pairs come round by round: every scenario's first seed in the
// catalogue's order, then every one's second; a scenario with fewer seeds
// (a shard's share) drops out when they are done.
func TestInterleave(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seeds map[string][]int64
		order []string
		want  []string
	}{
		{"one scenario", map[string][]int64{"a": {1, 2, 3}}, []string{"a"}, []string{"a1", "a2", "a3"}},
		{"equal seeds", map[string][]int64{"a": {1, 2}, "b": {1, 2}}, []string{"a", "b"}, []string{"a1", "b1", "a2", "b2"}},
		{"a shard's uneven share", map[string][]int64{"a": {2}, "b": {1, 3, 5}, "c": {4, 6}}, []string{"a", "b", "c"},
			[]string{"a2", "b1", "c4", "b3", "c6", "b5"}},
		{"nothing", map[string][]int64{}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var night []*nightScenario
			for _, name := range tc.order {
				night = append(night, &nightScenario{name: name, seeds: tc.seeds[name]})
			}

			var got []string
			for _, p := range interleave(night) {
				got = append(got, fmt.Sprintf("%s%d", p.s.name, p.seed))
			}

			if !slices.Equal(got, tc.want) {
				t.Errorf("interleave = %v, want %v", got, tc.want)
			}
		})
	}
}
