package sim

import (
	"fmt"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
)

// A SIGKILLed Kubernetes run leaves its addresses on lo; the next talchaos
// removes them, and only them: a block a live cluster claims keeps its own.
func TestReapHostAddrs(t *testing.T) {
	if err := canAddHostAddrs(); err != nil {
		t.Skipf("cannot add addresses here: %v", err)
	}

	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}

	add := func(block int) {
		addr, err := netlink.ParseAddr(fmt.Sprintf("%s.%d.250/32", hostAddrPrefix, block))
		if err != nil {
			t.Fatal(err)
		}

		addr.Label = hostAddrLabel(block)

		if err := netlink.AddrReplace(lo, addr); err != nil {
			t.Fatal(err)
		}

		t.Cleanup(func() { removeHostAddrs(block) })
	}

	live, claim, err := claimBlock(0)
	if err != nil {
		t.Fatal(err)
	}
	defer claim.Close() //nolint:errcheck

	dead, deadClaim, err := claimBlock(0)
	if err != nil {
		t.Fatal(err)
	}

	deadClaim.Close() //nolint:errcheck // its run was killed

	add(live)
	add(dead)

	removed := ReapHostAddrs()

	if !slices.Contains(removed, hostAddrLabel(dead)) {
		t.Errorf("removed %v, not the dead run's %s", removed, hostAddrLabel(dead))
	}

	if slices.Contains(removed, hostAddrLabel(live)) {
		t.Errorf("removed the live cluster's %s", hostAddrLabel(live))
	}

	addrs, err := netlink.AddrList(lo, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}

	if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.Label == hostAddrLabel(live) }) {
		t.Errorf("the live cluster's %s is gone", hostAddrLabel(live))
	}
}
