package orchestrator

import (
	"slices"
	"testing"
)

// Control planes are one cluster when their member lists share members, as
// a join makes them; two bootstraps make two (talos #5500).
func TestSeparateClusters(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members map[string][]uint64
		want    [][]string
	}{
		{"none runs etcd", map[string][]uint64{}, nil},
		{"one bootstrapped", map[string][]uint64{"cp1": {1}}, [][]string{{"cp1"}}},
		{"joined", map[string][]uint64{"cp1": {1, 2, 3}, "cp2": {1, 2, 3}, "cp3": {3, 1, 2}}, [][]string{{"cp1", "cp2", "cp3"}}},
		{"a learner's view lags", map[string][]uint64{"cp1": {1, 2}, "cp2": {1, 2, 3}, "cp3": {3}}, [][]string{{"cp1", "cp2", "cp3"}}},
		{"bootstrapped twice", map[string][]uint64{"cp1": {1, 2}, "cp2": {1, 2}, "cp3": {7}}, [][]string{{"cp1", "cp2"}, {"cp3"}}},
		{"linked last", map[string][]uint64{"cp1": {1}, "cp2": {2}, "cp3": {1, 2}}, [][]string{{"cp1", "cp2", "cp3"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := separateClusters(tc.members)
			if !slices.EqualFunc(got, tc.want, slices.Equal[[]string]) {
				t.Errorf("separateClusters(%v) = %v, want %v", tc.members, got, tc.want)
			}
		})
	}
}
