package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/talchaos/talchaos/sim/kubecp"
)

// Kubernetes refuses loopback addresses in the kubernetes endpoints
// ("may not be in the loopback range"), so a cluster that runs Kubernetes
// cannot give its nodes 127.0.<block>.x as the others do. Its nodes take
// 198.18.<block>.x instead (RFC 2544's benchmarking range, never routed on a
// real network), added to the loopback interface under the label
// lo:tc<block> for the cluster's life. That needs CAP_NET_ADMIN. The block is
// still claimed on 127.0.<block>.1 (listenClaim), so a label whose block
// nobody claims was left by a killed run: every talchaos command removes it
// (ReapHostAddrs), and so does the next cluster that runs Kubernetes.

// hostAddrPrefix is the first two octets of a Kubernetes cluster's node addresses.
const hostAddrPrefix = "198.18"

func hostAddrLabel(block int) string { return fmt.Sprintf("lo:tc%d", block) }

// addHostAddrs puts the block's endpoint (.1) and n node addresses (.2 on)
// on the loopback interface, after removing what killed runs left.
func addHostAddrs(block, n int) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("loopback interface: %w", err)
	}

	reapHostAddrs(lo, block)

	for i := 1; i <= n+1; i++ {
		addr, _ := netlink.ParseAddr(fmt.Sprintf("%s.%d.%d/32", hostAddrPrefix, block, i)) //nolint:errcheck // well-formed
		addr.Label = hostAddrLabel(block)

		if err := netlink.AddrReplace(lo, addr); err != nil {
			removeHostAddrs(block)

			return fmt.Errorf("cluster.kubernetes gives nodes non-loopback addresses (%s.%d.0/24 on lo), "+
				"which needs root or CAP_NET_ADMIN: add %s: %w", hostAddrPrefix, block, addr.IPNet, err)
		}
	}

	return nil
}

// removeHostAddrs removes the block's addresses.
func removeHostAddrs(block int) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return
	}

	removeLabelled(lo, hostAddrLabel(block))
}

// removeLabelled removes the addresses labelled label and reports whether
// it removed any.
func removeLabelled(lo netlink.Link, label string) bool {
	addrs, err := netlink.AddrList(lo, netlink.FAMILY_V4)
	if err != nil {
		return false
	}

	removed := false

	for _, a := range addrs {
		// A second remover may have been first.
		if a.Label == label && netlink.AddrDel(lo, &a) == nil {
			removed = true
		}
	}

	return removed
}

// ReapHostAddrs removes the loopback addresses killed Kubernetes runs left
// (their blocks no live cluster claims) and returns their labels.
func ReapHostAddrs() []string {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return nil
	}

	return reapHostAddrs(lo, -1)
}

// reapHostAddrs removes labelled addresses of blocks no live cluster claims
// (their claim on 127.0.<block>.1 can be taken), and any left in our own
// block; it returns the labels it removed addresses of.
func reapHostAddrs(lo netlink.Link, own int) []string {
	addrs, err := netlink.AddrList(lo, netlink.FAMILY_V4)
	if err != nil {
		return nil
	}

	var removed []string

	seen := map[string]bool{}

	for _, a := range addrs {
		var block int
		if _, err := fmt.Sscanf(a.Label, "lo:tc%d", &block); err != nil || seen[a.Label] ||
			!strings.HasPrefix(a.IP.String(), hostAddrPrefix+".") {
			continue
		}

		seen[a.Label] = true

		if block != own {
			l, err := listenClaim(block)
			if err != nil {
				continue // claimed: a live cluster's
			}

			l.Close() //nolint:errcheck
		}

		if removeLabelled(lo, a.Label) {
			removed = append(removed, a.Label)
		}
	}

	return removed
}

// capNetAdmin is CAP_NET_ADMIN's bit in /proc/self/status's CapEff.
const capNetAdmin = 12

// canAddHostAddrs says why this process cannot put addresses on the
// loopback interface, or nil when it can.
func canAddHostAddrs() error {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("cluster.kubernetes needs Linux with CAP_NET_ADMIN: %w", err)
	}

	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err == nil && caps&(1<<capNetAdmin) != 0 {
				return nil
			}
		}
	}

	return fmt.Errorf("cluster.kubernetes gives nodes non-loopback addresses (%s.N.x on lo), which needs root or CAP_NET_ADMIN", hostAddrPrefix)
}

// KubernetesAvailable says why a cluster with Kubernetes cannot run here (no
// kube-apiserver built, no right to add addresses), or nil when it can.
func KubernetesAvailable() error {
	if _, err := kubecp.Locate(""); err != nil {
		return fmt.Errorf("cluster.kubernetes: %w", err)
	}

	return canAddHostAddrs()
}
