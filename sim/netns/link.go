package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/mdlayher/arp"
	"github.com/vishvananda/netlink"
)

// AddToLink puts addr (a host address, /32 or /128) on the named link and
// announces it as Talos announces an address it assigns with
// AnnounceWithARP, a shared IP's (controllers/network/address_spec.go,
// v1.12.6: a gratuitous ARP request, IPv4 on Ethernet only), so that the
// hosts on the link that still map the address to its last holder's
// hardware address take the new one. For a node process in a container,
// which is in the container's namespace already.
func AddToLink(link string, addr netip.Addr) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return fmt.Errorf("link %q: %w", link, err)
	}

	a := &netlink.Addr{IPNet: netlinkNet(netip.PrefixFrom(addr, addr.BitLen()))}
	if err := netlink.AddrReplace(l, a); err != nil {
		return fmt.Errorf("adding %s to %q: %w", addr, link, err)
	}

	return gratuitousARP(link, addr)
}

// RemoveFromLink takes addr off the named link; an address not there is
// not an error.
func RemoveFromLink(link string, addr netip.Addr) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return fmt.Errorf("link %q: %w", link, err)
	}

	err = netlink.AddrDel(l, &netlink.Addr{IPNet: netlinkNet(netip.PrefixFrom(addr, addr.BitLen()))})
	if err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) {
		return fmt.Errorf("removing %s from %q: %w", addr, link, err)
	}

	return nil
}

// gratuitousARP is address_spec.go's gratuitousARP: an ARP request for ip
// from ip, broadcast.
func gratuitousARP(link string, ip netip.Addr) error {
	if !ip.Is4() {
		return nil
	}

	iface, err := net.InterfaceByName(link)
	if err != nil {
		return err
	}

	if len(iface.HardwareAddr) != 6 {
		return nil // not Ethernet
	}

	cli, err := arp.Dial(iface)
	if err != nil {
		return fmt.Errorf("error creating arp client: %w", err)
	}
	defer cli.Close() //nolint:errcheck

	packet, err := arp.NewPacket(arp.OperationRequest, cli.HardwareAddr(), ip, cli.HardwareAddr(), ip)
	if err != nil {
		return fmt.Errorf("error building packet: %w", err)
	}

	if err := cli.WriteTo(packet, net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); err != nil {
		return fmt.Errorf("error sending gratuitous ARP: %w", err)
	}

	return nil
}
