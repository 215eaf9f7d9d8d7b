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

// SetDropped makes the kernel drop every packet to and from the given IPv4
// and IPv6 addresses in the calling process's network namespace (nftables, through
// netlink: the image has no iptables), replacing what an earlier call set;
// none clears it. The container target runs it inside a node's container
// (`talchaos node-net`, which needs CAP_NET_ADMIN) to cut the node from
// others: packets are really dropped, both ways, and established connections
// go silent as on a real partition.
func SetDropped(addrs []string) error {
	var v4, v6 []netip.Addr

	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return fmt.Errorf("not an IP address: %q", a)
		}

		if ip.Is4() {
			v4 = append(v4, ip)
		} else {
			v6 = append(v6, ip)
		}
	}

	c, err := nftables.New()
	if err != nil {
		return err
	}

	// The source and destination addresses' offsets and length in each
	// family's header.
	for _, fam := range []struct {
		family        nftables.TableFamily
		ips           []netip.Addr
		src, dst, len uint32
	}{
		{nftables.TableFamilyIPv4, v4, 12, 16, 4},
		{nftables.TableFamilyIPv6, v6, 8, 24, 16},
	} {
		tables, err := c.ListTablesOfFamily(fam.family)
		if err != nil {
			return fmt.Errorf("nftables: %w", err)
		}

		for _, t := range tables {
			if t.Name == nftTable {
				c.DelTable(t)
			}
		}

		if len(fam.ips) == 0 {
			continue
		}

		t := c.AddTable(&nftables.Table{Family: fam.family, Name: nftTable})

		for hook, offset := range map[*nftables.ChainHook]uint32{nftables.ChainHookInput: fam.src, nftables.ChainHookOutput: fam.dst} {
			ch := c.AddChain(&nftables.Chain{
				Name: fmt.Sprintf("hook%d", *hook), Table: t, Type: nftables.ChainTypeFilter,
				Hooknum: hook, Priority: nftables.ChainPriorityFilter,
			})

			for _, ip := range fam.ips {
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
					// source address (input) or destination address (output) of the header
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: fam.len},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip.AsSlice()},
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
