package container

import (
	"errors"
	"testing"
)

// Only Docker's refusal for a subnet another network has is waited out; its
// words for an engine without a default IPv6 pool are not (they say
// "non-overlapping" too), nor any other refusal. The texts are Docker
// 28.2's, as `docker network create` prints them.
func TestAnotherNetworkHolds(t *testing.T) {
	for _, tc := range []struct {
		err  string
		want bool
	}{
		{"Error response from daemon: Pool overlaps with other one on this address space", true},
		{"Error response from daemon: invalid pool request: Pool overlaps with other one on this address space", true},
		{"Error response from daemon: could not find an available, non-overlapping IPv6 address pool among the defaults to assign to the network", false},
		{"Error response from daemon: invalid network config: invalid subnet 10.119.0.0/33", false},
	} {
		if got := anotherNetworkHolds(errors.New(tc.err)); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.err, got, tc.want)
		}
	}
}
