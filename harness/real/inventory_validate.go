package real

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/strictyaml"
)

var (
	// nodeNameRE is a DNS label: node names end up in hostnames and messages.
	nodeNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	// proxmoxNICRE is a Proxmox VM's network device key (net0, net1, ...).
	proxmoxNICRE = regexp.MustCompile(`^net[0-9]{1,2}$`)
	// qemuIDRE is a QEMU object id, as a netdev's.
	qemuIDRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,127}$`)
	// envNameRE is a portable environment variable name.
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)
)

// Proxmox VE's VMID range.
const (
	minVMID = 100
	maxVMID = 999_999_999
)

// Roles of inventory nodes.
const (
	roleControlPlane = "controlplane"
	roleWorker       = "worker"
)

// validator collects every problem of a decoded inventory.
type validator struct {
	inv  *Inventory
	errs []*strictyaml.Error
}

func (v *validator) errorf(field, format string, args ...any) {
	v.errs = append(v.errs, v.inv.errorf(field, format, args...))
}

// validate checks a decoded inventory without touching the disk.
func (inv *Inventory) validate() error {
	v := &validator{inv: inv}

	v.header()
	v.nodes()
	v.proxmox()

	return strictyaml.Collect(v.errs)
}

func (v *validator) header() {
	inv := v.inv

	switch inv.APIVersion {
	case scenario.APIVersion:
	case "":
		v.errorf("apiVersion", "required: %s", scenario.APIVersion)
	default:
		v.errorf("apiVersion", "must be %q, got %s", scenario.APIVersion, quote(inv.APIVersion))
	}

	switch inv.Kind {
	case InventoryKind:
	case "":
		v.errorf("kind", "required: %s", InventoryKind)
	default:
		v.errorf("kind", "must be %q, got %s", InventoryKind, quote(inv.Kind))
	}

	// Written so that NaN fails too; 0 is "not written".
	if inv.TimeScale != 0 && !(inv.TimeScale >= 1 && inv.TimeScale <= scenario.MaxTimeScale) {
		v.errorf("timeScale", "must be between 1 and %d, got %v (1: real Talos nodes)", scenario.MaxTimeScale, inv.TimeScale)
	}

	if inv.Talosconfig == "" {
		v.errorf("talosconfig", "required: the path of the talosconfig that reaches the nodes")
	}
}

func (v *validator) nodes() {
	inv := v.inv

	switch {
	case len(inv.Nodes) == 0:
		v.errorf("nodes", "at least one node is required")

		return
	case len(inv.Nodes) > MaxInventoryNodes:
		v.errorf("nodes", "%d nodes: at most %d", len(inv.Nodes), MaxInventoryNodes)

		return
	}

	names := map[string]int{}     // name -> index of its first node
	addresses := map[string]int{} // canonical address -> index
	vms := map[string]int{}       // proxmox node/vmid or qmp socket -> index

	for i, n := range inv.Nodes {
		p := fmt.Sprintf("nodes[%d]", i)

		v.nodeName(p, n, i, names)
		v.role(p, n)
		v.address(p, n, i, addresses)

		if n.Endpoint != "" {
			if msg := checkHostPort(n.Endpoint); msg != "" {
				v.errorf(p+".endpoint", "%s", msg)
			}
		}

		if n.Config == "" {
			v.errorf(p+".config", "required: the path of the node's machine config")
		}

		v.vm(p, n, i, vms)
	}
}

func (v *validator) nodeName(p string, n InventoryNode, i int, names map[string]int) {
	switch first, dup := names[n.Name]; {
	case n.Name == "":
		v.errorf(p+".name", "required")
	case !nodeNameRE.MatchString(n.Name):
		v.errorf(p+".name", "invalid node name %s: lower-case letters, digits and dashes, as cp1 or w2", quote(n.Name))
	case dup:
		v.errorf(p+".name", "duplicate node %q (first on line %d)", n.Name, v.inv.lines.Line(fmt.Sprintf("nodes[%d].name", first)))
	default:
		names[n.Name] = i
	}
}

func (v *validator) role(p string, n InventoryNode) {
	switch n.Role {
	case roleControlPlane, roleWorker:
	case "":
		v.errorf(p+".role", "required: controlplane or worker")

		return
	default:
		v.errorf(p+".role", "%s is not controlplane or worker", quote(n.Role))

		return
	}

	// A scenario's cpN are control planes and its wN workers: a node named
	// otherwise than its role could never stand in for the scenario's node.
	if want := nameRole(n.Name); want != "" && want != n.Role {
		v.errorf(p+".role", "%s is named as a %s but has role %s", n.Name, want, n.Role)
	}
}

// nameRole is the role the scenario gives a node of that name: controlplane
// for cp1, cp2, ..., worker for w1, w2, ..., "" for other names.
func nameRole(name string) string {
	switch {
	case scenario.IsControlPlane(name):
		return roleControlPlane
	case isWorkerName(name):
		return roleWorker
	}

	return ""
}

// isWorkerName reports whether name is w1, w2, ... (no leading zeros, as
// scenario.Cluster.NodeNames writes them).
func isWorkerName(name string) bool {
	n, ok := strings.CutPrefix(name, "w")
	if !ok || n == "" || n[0] == '0' {
		return false
	}

	for _, r := range n {
		if r < '0' || r > '9' {
			return false
		}
	}

	return true
}

func (v *validator) address(p string, n InventoryNode, i int, addresses map[string]int) {
	if n.Address == "" {
		v.errorf(p+".address", "required: the node's IP, as in etcd member lists and its certificates")

		return
	}

	addr, err := netip.ParseAddr(n.Address)

	switch {
	case err != nil:
		v.errorf(p+".address", "%s is not an IP address (the node's IP, as in etcd member lists and its certificates)", quote(n.Address))

		return
	case addr.Zone() != "":
		v.errorf(p+".address", "%s: an IPv6 zone is not part of a node's address in member lists and certificates", quote(n.Address))

		return
	case addr.IsUnspecified() || addr.IsMulticast():
		v.errorf(p+".address", "%s is not a node's address", n.Address)

		return
	}

	key := addr.Unmap().String()
	if first, dup := addresses[key]; dup {
		v.errorf(p+".address", "%s is also the address of nodes[%d] (line %d)", n.Address, first, v.inv.lines.Line(fmt.Sprintf("nodes[%d].address", first)))

		return
	}

	addresses[key] = i
}

// checkHostPort checks a host:port endpoint; it returns what is wrong, or "".
func checkHostPort(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("%s is not host:port", quote(s))
	}

	if host == "" {
		return fmt.Sprintf("%s has no host", quote(s))
	}

	if strings.ContainsAny(host, " /\t") {
		return fmt.Sprintf("%s: %s is not a host name or IP", quote(s), quote(host))
	}

	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("%s: port %s is not a number from 1 to 65535", quote(s), quote(port))
	}

	return ""
}

// vm checks a node's power and NIC provider: at most one, each complete, and
// no two nodes driving the same VM (a fault meant for one node would hit the
// other).
func (v *validator) vm(p string, n InventoryNode, i int, vms map[string]int) {
	if n.Proxmox != nil && n.QEMU != nil {
		v.errorf(p+".qemu", "a node has one provider: proxmox or qemu, not both")

		return
	}

	var key, field string

	switch {
	case n.Proxmox != nil:
		field = p + ".proxmox"
		vm := n.Proxmox

		if v.inv.Proxmox == nil {
			v.errorf(field, "needs the inventory's proxmox section (url, tokenID and the token secret)")
		}

		if vm.Node == "" {
			v.errorf(field+".node", "required: the Proxmox node the VM runs on")
		}

		if vm.VMID < minVMID || vm.VMID > maxVMID {
			v.errorf(field+".vmid", "must be a Proxmox VMID from %d to %d, got %d", minVMID, maxVMID, vm.VMID)
		}

		if vm.NIC != "" && !proxmoxNICRE.MatchString(vm.NIC) {
			v.errorf(field+".nic", "%s is not a Proxmox network device key (net0, net1, ...)", quote(vm.NIC))
		}

		key = fmt.Sprintf("proxmox VM %d on %s", vm.VMID, vm.Node)
	case n.QEMU != nil:
		field = p + ".qemu"

		if n.QEMU.QMP == "" {
			v.errorf(field+".qmp", "required: the path of the VM's QMP socket")
		}

		if n.QEMU.NIC != "" && !qemuIDRE.MatchString(n.QEMU.NIC) {
			v.errorf(field+".nic", "%s is not a QEMU netdev id", quote(n.QEMU.NIC))
		}

		key = "QMP socket " + v.inv.path(n.QEMU.QMP)
	default:
		return
	}

	if first, dup := vms[key]; dup {
		v.errorf(field, "nodes[%d] (line %d) already drives this VM (%s)", first, v.inv.lines.Line(fmt.Sprintf("nodes[%d]", first)), key)

		return
	}

	vms[key] = i
}

func (v *validator) proxmox() {
	p := v.inv.Proxmox
	if p == nil {
		return
	}

	if msg := proxmoxURLProblem(p.URL); msg != "" {
		v.errorf("proxmox.url", "%s", msg)
	}

	switch user, token, ok := strings.Cut(p.TokenID, "!"); {
	case p.TokenID == "":
		v.errorf("proxmox.tokenID", "required: the API token ID, as root@pam!talchaos")
	case strings.ContainsAny(p.TokenID, "=: \t") || tokenSecretShape.MatchString(p.TokenID):
		// root@pam!talchaos=SECRET, as the Authorization header carries it.
		v.errorf("proxmox.tokenID", "is not of the form user@realm!tokenname and seems to hold the token's secret (not shown): %s", secretHome)
	case !ok || token == "" || !strings.Contains(user, "@") || strings.HasPrefix(user, "@") || strings.HasSuffix(user, "@"):
		v.errorf("proxmox.tokenID", "%s is not of the form user@realm!tokenname", quote(p.TokenID))
	}

	switch {
	case p.TokenSecretFile == "" && p.TokenSecretEnv == "":
		v.errorf("proxmox", "the API token secret is required: tokenSecretFile or tokenSecretEnv")
	case p.TokenSecretFile != "" && p.TokenSecretEnv != "":
		v.errorf("proxmox.tokenSecretEnv", "one of tokenSecretFile or tokenSecretEnv, not both")
	case p.TokenSecretEnv != "" && tokenSecretShape.MatchString(p.TokenSecretEnv):
		v.errorf("proxmox.tokenSecretEnv", "looks like the token's secret itself (not shown), not the name of the environment variable that holds it")
	case p.TokenSecretEnv != "" && !envNameRE.MatchString(p.TokenSecretEnv):
		v.errorf("proxmox.tokenSecretEnv", "%s is not an environment variable name", quote(p.TokenSecretEnv))
	}
}

// tokenSecretShape is a Proxmox VE API token secret: a UUID. A value of that
// shape where the inventory wants something else is the secret put in the
// wrong place, and is never quoted back.
var tokenSecretShape = regexp.MustCompile(`^\s*[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\s*$`)

// secretHome says where the Proxmox API token's secret goes.
const secretHome = "the API token's secret belongs in the file tokenSecretFile names or the environment variable tokenSecretEnv names, never in the inventory"

// proxmoxURLProblem checks the Proxmox VE API URL; it returns what is wrong,
// or "". A URL that may hold a secret is not quoted back: the message names
// the problem and the field (the caller adds file and line).
//
// Refused:
//   - credentials in the URL: a user name or password before the host
//     (https://root@pam:pw@pve), a query or fragment (?password=, #token=),
//     or anything the scrubber would redact (result.ScrubKeyMaterial). The
//     URL is printed in errors and written into reports; the token's secret
//     has its own field.
//   - plain http, but to a loopback address: talchaos sends the API token in
//     the Authorization header of every request, which anyone on the path of
//     plain http reads. To 127.0.0.1 or [::1] (an SSH tunnel, a local test
//     server) it never leaves the machine. A host name, "localhost" included,
//     is not taken as loopback: what it resolves to is not the inventory's
//     to say. proxmox.Open applies the same rule to a configuration built
//     in code.
func proxmoxURLProblem(raw string) string {
	const want = "the Proxmox VE API, as https://pve:8006/api2/json"

	if raw == "" {
		return "required: " + want
	}

	if tokenSecretShape.MatchString(raw) {
		return "looks like an API token secret (not shown), not a URL: " + secretHome + "; url is " + want
	}

	u, err := url.Parse(raw)

	switch {
	case strings.Contains(raw, "@") || (err == nil && u.User != nil) || result.ScrubKeyMaterial(raw) != raw:
		return "holds credentials (not shown: a user name or password before the host, or a secret parameter), " +
			"and the URL is printed in errors and reports: " + secretHome
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		return fmt.Sprintf("%s is not an http(s) URL of %s", quote(raw), want)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		return "has a query or fragment (not shown, it may hold a secret): the API URL is scheme, host, port and path, as https://pve:8006/api2/json; " + secretHome
	case u.Scheme == "http" && !isLoopbackIP(u.Hostname()):
		return "plain http: talchaos sends the API token in the Authorization header of every request, which anyone on the network path reads over http; " +
			"use https (insecureSkipVerify: true for PVE's self-signed certificate). http is accepted only to a loopback IP (127.0.0.1, [::1]: an SSH tunnel, a local test server)"
	}

	return ""
}

// isLoopbackIP reports whether host is a loopback IP address (not a name).
func isLoopbackIP(host string) bool {
	addr, err := netip.ParseAddr(host)

	return err == nil && addr.IsLoopback()
}

// quote quotes a value for a message, cut short when long: inventories are
// read by people, and a 200 KiB string is a mistake to point at, not to print.
func quote(s string) string {
	if r := []rune(s); len(r) > 64 {
		return strconv.Quote(string(r[:64])) + "..."
	}

	return strconv.Quote(s)
}
