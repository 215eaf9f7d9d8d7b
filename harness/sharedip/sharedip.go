// Package sharedip reads the shared IP (VIP) a control plane's machine config
// gives it, as Talos's network config controllers read it
// (internal/app/machined/pkg/controllers/network/operator_config.go, v1.12.6:
// a device's or VLAN's `vip`, or a Layer2VIPConfig document): the sim serves
// it and the observer looks for it among a node's addresses.
package sharedip

import (
	"fmt"
	"net/netip"

	"github.com/siderolabs/talos/pkg/machinery/config"
)

// Of is the shared IP the config gives a control plane, and its link; false
// for a worker, no config or none given.
func Of(cfg config.Config) (netip.Addr, string, bool) {
	if cfg == nil || cfg.Machine() == nil || !cfg.Machine().Type().IsControlPlane() {
		return netip.Addr{}, "", false
	}

	for _, d := range cfg.Machine().Network().Devices() {
		if v := d.VIPConfig(); v != nil {
			if ip, err := netip.ParseAddr(v.IP()); err == nil {
				return ip, d.Interface(), true
			}
		}

		for _, vlan := range d.Vlans() {
			if v := vlan.VIPConfig(); v != nil {
				if ip, err := netip.ParseAddr(v.IP()); err == nil {
					return ip, fmt.Sprintf("%s.%d", d.Interface(), vlan.ID()), true
				}
			}
		}
	}

	for _, doc := range cfg.NetworkVirtualIPConfigs() {
		return doc.VIP(), doc.Link(), true
	}

	return netip.Addr{}, "", false
}
