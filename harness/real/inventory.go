// Package real is the target made of real Talos nodes: an inventory names them,
// a talosconfig reaches them, machine configs are applied to them, and power
// and NIC faults go through a provider (Proxmox VE or QEMU QMP). The engine runs
// unchanged; only what the target can inject differs.
package real

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// InventoryKind is the document kind of inventory files.
const InventoryKind = "Inventory"

// Inventory lists the nodes of a real cluster and how to reach them.
type Inventory struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	// Talosconfig is the path of the talosconfig (relative to the inventory file).
	Talosconfig string          `yaml:"talosconfig"`
	Nodes       []InventoryNode `yaml:"nodes"`
	// Proxmox is the Proxmox VE API the nodes' VMs live on, if any.
	Proxmox *ProxmoxAPI `yaml:"proxmox,omitempty"`

	// dir is the inventory file's directory, for relative paths.
	dir string
}

// InventoryNode is one node.
type InventoryNode struct {
	Name     string `yaml:"name"`
	Role     string `yaml:"role"`               // controlplane | worker
	Address  string `yaml:"address"`            // IP as in member lists and certificates
	Endpoint string `yaml:"endpoint,omitempty"` // Talos API host:port; default address:50000
	Config   string `yaml:"config"`             // machine config path (relative to the inventory file)

	// Power and NIC control, at most one.
	Proxmox *ProxmoxVM `yaml:"proxmox,omitempty"`
	QEMU    *QEMUVM    `yaml:"qemu,omitempty"`
}

// ProxmoxAPI is how to reach Proxmox VE. The token secret comes from a file or
// an environment variable, never from the inventory itself.
type ProxmoxAPI struct {
	URL                string `yaml:"url"` // e.g. https://pve:8006/api2/json
	TokenID            string `yaml:"tokenID"`
	TokenSecretFile    string `yaml:"tokenSecretFile,omitempty"`
	TokenSecretEnv     string `yaml:"tokenSecretEnv,omitempty"`
	InsecureSkipVerify bool   `yaml:"insecureSkipVerify,omitempty"`
}

// ProxmoxVM is a node's VM on Proxmox VE.
type ProxmoxVM struct {
	Node string `yaml:"node"` // Proxmox node name
	VMID int    `yaml:"vmid"`
	NIC  string `yaml:"nic,omitempty"` // default net0
}

// QEMUVM is a node's QEMU process, controlled through its QMP socket.
type QEMUVM struct {
	QMP string `yaml:"qmp"`           // unix socket path
	NIC string `yaml:"nic,omitempty"` // netdev id for set_link, default net0
}

// LoadInventory reads and checks an inventory file. Unknown fields are errors.
func LoadInventory(path string) (*Inventory, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)

	var inv Inventory
	if err := dec.Decode(&inv); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	inv.dir = filepath.Dir(path)

	if err := inv.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	return &inv, nil
}

func (inv *Inventory) validate() error {
	var errs []string

	if inv.Kind != InventoryKind {
		errs = append(errs, fmt.Sprintf("kind: must be %q", InventoryKind))
	}

	if inv.Talosconfig == "" {
		errs = append(errs, "talosconfig: required")
	}

	if len(inv.Nodes) == 0 {
		errs = append(errs, "nodes: at least one node is required")
	}

	var names []string

	for i, n := range inv.Nodes {
		field := fmt.Sprintf("nodes[%d]", i)

		switch {
		case n.Name == "":
			errs = append(errs, field+".name: required")
		case slices.Contains(names, n.Name):
			errs = append(errs, fmt.Sprintf("%s.name: duplicate node %q", field, n.Name))
		}

		names = append(names, n.Name)

		if n.Role != "controlplane" && n.Role != "worker" {
			errs = append(errs, fmt.Sprintf("%s.role: %q is not controlplane or worker", field, n.Role))
		}

		if n.Address == "" {
			errs = append(errs, field+".address: required")
		}

		if n.Config == "" {
			errs = append(errs, field+".config: required")
		}

		if n.Proxmox != nil && n.QEMU != nil {
			errs = append(errs, field+": proxmox and qemu cannot both be set")
		}

		if n.Proxmox != nil && inv.Proxmox == nil {
			errs = append(errs, field+".proxmox: needs the inventory's proxmox API section")
		}
	}

	if p := inv.Proxmox; p != nil {
		if p.URL == "" || p.TokenID == "" {
			errs = append(errs, "proxmox: url and tokenID are required")
		}

		if (p.TokenSecretFile == "") == (p.TokenSecretEnv == "") {
			errs = append(errs, "proxmox: exactly one of tokenSecretFile or tokenSecretEnv")
		}
	}

	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}

	return nil
}

// path resolves a path relative to the inventory file.
func (inv *Inventory) path(p string) string {
	if filepath.IsAbs(p) || inv.dir == "" {
		return p
	}

	return filepath.Join(inv.dir, p)
}

// Node finds a node by name.
func (inv *Inventory) Node(name string) (InventoryNode, bool) {
	for _, n := range inv.Nodes {
		if n.Name == name {
			return n, true
		}
	}

	return InventoryNode{}, false
}
