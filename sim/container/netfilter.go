package container

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// nftTable is the table `talchaos node-net` owns inside a node's network
// namespace.
const nftTable = "talchaos"

// SetDropped makes the kernel drop every packet to and from the given
// addresses in the calling process's network namespace (nftables, through
// netlink: the image has no iptables), replacing what an earlier call set;
// none clears it. The container target runs it inside a node's container
// (`talchaos node-net`, which needs CAP_NET_ADMIN) to cut the node from
// others: packets are really dropped, both ways, and established connections
// go silent as on a real partition.
func SetDropped(addrs []string) error {
	ips := make([]netip.Addr, 0, len(addrs))

	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || !ip.Is4() {
			return fmt.Errorf("not an IPv4 address: %q", a)
		}

		ips = append(ips, ip)
	}

	c, err := nftables.New()
	if err != nil {
		return err
	}

	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}

	for _, t := range tables {
		if t.Name == nftTable {
			c.DelTable(t)
		}
	}

	if len(ips) > 0 {
		t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: nftTable})

		for hook, offset := range map[*nftables.ChainHook]uint32{nftables.ChainHookInput: 12, nftables.ChainHookOutput: 16} {
			ch := c.AddChain(&nftables.Chain{
				Name: fmt.Sprintf("hook%d", *hook), Table: t, Type: nftables.ChainTypeFilter,
				Hooknum: hook, Priority: nftables.ChainPriorityFilter,
			})

			for _, ip := range ips {
				b := ip.As4()
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
					// source address (input) or destination address (output) of the IPv4 header
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b[:]},
					&expr.Verdict{Kind: expr.VerdictDrop},
				}})
			}
		}
	}

	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}

	return nil
}
