// Package real is the target made of real Talos nodes: an inventory names them,
// a talosconfig reaches them, machine configs are applied to them, and power
// and NIC faults go through a provider (Proxmox VE or QEMU QMP). The engine runs
// unchanged; only what the target can inject differs.
package real

import (
	"fmt"
	"path/filepath"
	"reflect"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"

	"github.com/talchaos/talchaos/harness/inputfile"
	"github.com/talchaos/talchaos/harness/strictyaml"
)

// InventoryKind is the document kind of inventory files.
const InventoryKind = "Inventory"

// MaxInventoryNodes bounds the nodes of one inventory: a lab cluster, not a fleet.
const MaxInventoryNodes = 100

// Inventory lists the nodes of a real cluster and how to reach them.
type Inventory struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	// Talosconfig is the path of the talosconfig (relative to the inventory file).
	Talosconfig string          `yaml:"talosconfig"`
	Nodes       []InventoryNode `yaml:"nodes"`
	// Proxmox is the Proxmox VE API the nodes' VMs live on, if any.
	Proxmox *ProxmoxAPI `yaml:"proxmox,omitempty"`
	// TimeScale is how much faster than real time the nodes' Talos timers
	// run: 1 (the default) for real Talos, whatever a scenario says. Only
	// simulated nodes run faster; `talchaos up` writes its nodes' scale here.
	TimeScale float64 `yaml:"timeScale,omitempty"`

	// talosconfig is the talosconfig as the load read it.
	talosconfig *clientconfig.Config
	// dir is the inventory file's directory, for relative paths.
	dir string
	// file and lines place problems found after decoding (an inventory built
	// in code has neither).
	file  string
	lines strictyaml.Lines
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

const emptyInventory = "empty inventory: expected a mapping with apiVersion, kind, talosconfig and nodes"

// LoadInventory reads an inventory file, decodes it strictly, validates it and
// checks that every file it names (talosconfig, machine configs, Proxmox token
// secret) exists and loads, so that a run never starts with an inventory it
// cannot use. Every problem is a *strictyaml.Error, or strictyaml.Errors for
// several, printed as FILE:LINE: FIELD: MSG with the line of the field at fault.
// Errors never quote the contents of the files the inventory names.
func LoadInventory(path string) (*Inventory, error) {
	data, err := readFile(path, strictyaml.MaxFileBytes)
	if err != nil {
		return nil, &strictyaml.Error{File: path, Line: 1, Msg: "cannot read the inventory: " + describeFileError(err, path)}
	}

	return loadInventory(path, data)
}

// loadInventory is LoadInventory on the file's contents: ParseInventory, then
// the checks on the files it names.
func loadInventory(path string, data []byte) (*Inventory, error) {
	inv, err := ParseInventory(path, data)
	if err != nil {
		return nil, err
	}

	if err := inv.checkFiles(); err != nil {
		return nil, err
	}

	return inv, nil
}

// ParseInventory decodes and validates an inventory without touching the disk.
// file names it in errors, and relative paths in it are relative to file's
// directory.
func ParseInventory(file string, data []byte) (_ *Inventory, err error) {
	// Whatever the file, reading it must never take the harness down.
	defer func() {
		if r := recover(); r != nil {
			err = &strictyaml.Error{File: file, Line: 1, Msg: fmt.Sprintf("internal error reading the inventory: %v", r)}
		}
	}()

	root, err := strictyaml.ReadRoot(file, data, "an inventory", emptyInventory)
	if err != nil {
		return nil, err
	}

	d := strictyaml.NewDecoder(file)
	d.Lines[""] = root.Line

	var inv Inventory

	d.Decode(root, reflect.ValueOf(&inv).Elem(), "")

	// A half-decoded inventory would fail validation for the same reasons again.
	if err := d.Err(); err != nil {
		return nil, err
	}

	inv.dir = filepath.Dir(file)
	inv.file = file
	inv.lines = d.Lines

	if err := inv.validate(); err != nil {
		return nil, err
	}

	return &inv, nil
}

// errorf builds a problem at a field of the inventory, on the line of that
// field or of its nearest parent written in the file.
func (inv *Inventory) errorf(field, format string, args ...any) *strictyaml.Error {
	return &strictyaml.Error{File: inv.file, Line: inv.lines.Line(field), Field: field, Msg: fmt.Sprintf(format, args...)}
}

// where is FILE:LINE of a field, for messages that point into the inventory.
func (inv *Inventory) where(field string) string {
	if inv.file == "" {
		return "the inventory"
	}

	return fmt.Sprintf("%s:%d", inv.file, inv.lines.Line(field))
}

// path resolves a path relative to the inventory file.
func (inv *Inventory) path(p string) string {
	if filepath.IsAbs(p) || inv.dir == "" {
		return p
	}

	return filepath.Join(inv.dir, p)
}

// TalosconfigPath is the talosconfig's path, resolved against the inventory's
// directory.
func (inv *Inventory) TalosconfigPath() string { return inv.path(inv.Talosconfig) }

// Node finds a node by name.
func (inv *Inventory) Node(name string) (InventoryNode, bool) {
	for _, n := range inv.Nodes {
		if n.Name == name {
			return n, true
		}
	}

	return InventoryNode{}, false
}

// readFile reads a regular file of at most limit bytes (package inputfile:
// a FIFO that would block, a device, a directory are refused).
func readFile(path string, limit int64) ([]byte, error) {
	return inputfile.Read(path, limit)
}
