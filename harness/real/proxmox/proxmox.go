// Package proxmox drives power and NIC faults on a Proxmox VE QEMU VM through
// the PVE API (github.com/luthermonson/go-proxmox), authenticated with an API
// token.
//
// # Operations
//
// PowerOff is a hard stop (POST .../status/stop: QEMU quits at once, like
// pulling the plug), PowerOn a start, Reset a hard reset (system_reset),
// Pause a suspend to RAM (POST .../status/suspend without todisk: the vCPUs
// stop, task type qmpause) and Resume its counterpart. SetLink toggles the
// link_down flag of the VM's NIC (net0 unless told otherwise) with an
// asynchronous config update; PVE applies a link_down-only change to a
// running VM at once (qemu_set_link_status), whatever the VM's hotplug
// setting. Link down sets link_down=1 in place (or appends it), link up
// removes the flag, so a down/up cycle gives back the NIC's exact config
// string; the rest of the value (model, MAC, bridge, firewall, tag, ...) is
// never touched. The update carries the config digest read just before, so
// PVE refuses it if someone changed the config in between.
//
// # Tasks
//
// Every state-changing call starts a PVE worker task and waits for it: it
// polls GET /nodes/{node}/tasks/{upid}/status (at once, then backing off from
// 50 ms to 1 s) until the task is "stopped", and fails unless the exit status
// is "OK" (or PVE's "WARNINGS: n", which PVE itself counts as success: the
// work was done and something was logged). The error carries the exit status
// text and is a *TaskError. After a power action the VM's current status is
// read back and must show the expected state (stopped, running, paused), so
// a call that returns nil means the VM is in that state; this catches e.g. an
// HA-managed VM, whose stop or start task only hands the request to the HA
// manager.
//
// Every wait is bounded by the context; one without a deadline gets
// DefaultTimeout. A cancelled wait returns the context's error at once, but
// the task keeps running on the PVE node.
//
// # Secrets
//
// The token secret is sent only in the Authorization header, so Open refuses
// an API URL that holds credentials (userinfo, a query or fragment) and plain
// http but to a loopback IP; it never quotes the URL. Error texts are
// scrubbed of the secret, and go-proxmox's logger is replaced by one that drops
// everything (its debug output would include request bodies).
package proxmox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	pve "github.com/luthermonson/go-proxmox"
)

// DefaultNIC is the NIC SetLink acts on when VM.NIC is empty.
const DefaultNIC = "net0"

// DefaultTimeout bounds an operation whose context has no deadline (heal
// functions run with context.WithoutCancel). PVE's stop waits up to 60 s for
// QEMU to exit before it kills it, and a start may take a while longer.
const DefaultTimeout = 3 * time.Minute

// Polling of a task's status: at once, then every first, doubling up to last.
var (
	pollFirst = 50 * time.Millisecond
	pollLast  = time.Second
)

// Config is how to reach the PVE API.
type Config struct {
	// URL is the API endpoint, e.g. https://pve.lab:8006 ("/api2/json" is
	// added when missing).
	URL string
	// TokenID is the API token ID, "user@realm!tokenname".
	TokenID string
	// TokenSecret is the token's secret (a UUID).
	TokenSecret string
	// InsecureSkipVerify skips TLS certificate verification (PVE's default
	// self-signed certificate). Ignored when HTTPClient is set.
	InsecureSkipVerify bool
	// HTTPClient, if set, is used as is (tests). Its Timeout, if any, bounds
	// every request on top of the context.
	HTTPClient *http.Client
}

// VM names the VM to drive.
type VM struct {
	Node string // PVE node the VM lives on
	VMID int
	NIC  string // netX key SetLink acts on; DefaultNIC if empty
}

// TaskError is a PVE task that ended with an exit status other than "OK".
type TaskError struct {
	UPID       string
	Type       string // qmstart, qmstop, qmreset, qmpause, qmresume, qmconfig, ...
	ExitStatus string // PVE's text, e.g. "VM is locked (backup)"
}

func (e *TaskError) Error() string {
	return fmt.Sprintf("task %q failed: %s", e.UPID, e.ExitStatus)
}

// Machine is one PVE VM. Its methods may be called concurrently, but PVE
// serialises actions on a VM with the VM's config lock.
type Machine struct {
	client  *pve.Client
	vm      *pve.VirtualMachine
	node    string
	vmid    int
	nic     string
	tokenID string
	secret  string
	idle    func() // closes idle connections of an HTTP client we own
	closed  atomic.Bool
}

// Open connects to PVE and looks the node and the VM up: GET
// /nodes/{node}/status, then the VM's status/current and config. It checks
// that the VM has the NIC SetLink will use and is not a template.
func Open(ctx context.Context, cfg Config, vm VM) (*Machine, error) {
	m := &Machine{node: vm.Node, vmid: vm.VMID, nic: vm.NIC, tokenID: cfg.TokenID, secret: cfg.TokenSecret}
	if m.nic == "" {
		m.nic = DefaultNIC
	}

	if err := checkConfig(cfg, vm); err != nil {
		return nil, m.errorf(err, "proxmox: %v", err)
	}

	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone() //nolint:forcetypeassert // the standard library's
		if cfg.InsecureSkipVerify {
			tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // asked for: lab PVE with a self-signed certificate
		}

		hc = &http.Client{Transport: tr}
		m.idle = tr.CloseIdleConnections
	}

	m.client = pve.NewClient(apiURL(cfg.URL),
		pve.WithHTTPClient(hc),
		pve.WithAPIToken(cfg.TokenID, cfg.TokenSecret),
		pve.WithUserAgent("talchaos"),
		pve.WithLogger(quietLogger{}),
	)

	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()

	node, err := m.client.Node(ctx, vm.Node)
	if err != nil {
		m.Close() //nolint:errcheck // nothing to report

		return nil, m.errorf(err, "proxmox: node %q: %v", vm.Node, m.explain(ctx, err))
	}

	v, err := node.VirtualMachine(ctx, vm.VMID)
	if err != nil {
		m.Close() //nolint:errcheck // nothing to report

		return nil, m.errorf(err, "proxmox: VM %d on node %q: %v", vm.VMID, vm.Node, m.explain(ctx, err))
	}

	if bool(v.Template) {
		m.Close() //nolint:errcheck // nothing to report

		return nil, m.errorf(nil, "proxmox: VM %d on node %q is a template", vm.VMID, vm.Node)
	}

	if v.VirtualMachineConfig == nil || v.VirtualMachineConfig.Nets[m.nic] == "" {
		m.Close() //nolint:errcheck // nothing to report

		return nil, m.errorf(nil, "proxmox: VM %d on node %q has no NIC %s (it has: %s)",
			vm.VMID, vm.Node, m.nic, nicList(v.VirtualMachineConfig))
	}

	m.vm = v

	return m, nil
}

func checkConfig(cfg Config, vm VM) error {
	switch {
	case cfg.URL == "":
		return errors.New("no API URL")
	case urlProblem(cfg.URL) != "":
		return errors.New("API URL: " + urlProblem(cfg.URL))
	case cfg.TokenID == "":
		return errors.New("no API token ID")
	case strings.ContainsAny(cfg.TokenID, "=: \t"):
		return errors.New("API token ID (not shown) holds the token's secret: it is user@realm!tokenname, the secret goes in TokenSecret")
	case !strings.Contains(cfg.TokenID, "@") || !strings.Contains(cfg.TokenID, "!"):
		return fmt.Errorf("API token ID %q is not of the form user@realm!tokenname", cfg.TokenID)
	case cfg.TokenSecret == "":
		return fmt.Errorf("API token %q has no secret", cfg.TokenID)
	case vm.Node == "":
		return fmt.Errorf("VM %d: no node", vm.VMID)
	case vm.VMID <= 0:
		return fmt.Errorf("node %q: invalid VMID %d", vm.Node, vm.VMID)
	case !strings.HasPrefix(vm.NIC, "net") && vm.NIC != "":
		return fmt.Errorf("VM %d on node %q: NIC %q is not a netX key", vm.VMID, vm.Node, vm.NIC)
	}

	return nil
}

// urlProblem says what is wrong with an API URL, or "". The URL is never
// quoted: it may hold a secret.
//
// A URL with credentials (userinfo, a query or fragment) is refused: the URL
// shows in errors, the token's secret has its own field. So is plain http,
// but to a loopback IP: the token is sent in the Authorization header of
// every request, which anyone on the path of plain http reads; to 127.0.0.1
// or [::1] (an SSH tunnel, the fake PVE of the tests) it does not leave the
// machine. The inventory (package real) refuses the same, with messages that
// name its fields.
func urlProblem(raw string) string {
	u, err := url.Parse(raw)

	switch {
	case strings.Contains(raw, "@") || (err == nil && u.User != nil):
		return "holds credentials (not shown): the token's secret goes in TokenSecret"
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return "not an http(s) URL with a host (not shown)"
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		return "has a query or fragment (not shown, it may hold a secret)"
	case u.Scheme == "http":
		if addr, err := netip.ParseAddr(u.Hostname()); err != nil || !addr.IsLoopback() {
			return "plain http would send the API token in clear text to a host other than a loopback IP: use https"
		}
	}

	return ""
}

// apiURL adds /api2/json to a bare https://host:8006.
func apiURL(u string) string {
	u = strings.TrimRight(u, "/")
	if !strings.HasSuffix(u, "/api2/json") {
		u += "/api2/json"
	}

	return u
}

func nicList(c *pve.VirtualMachineConfig) string {
	if c == nil || len(c.Nets) == 0 {
		return "none"
	}

	return strings.Join(slices.Sorted(maps.Keys(c.Nets)), ", ")
}

// PowerOff stops the VM hard (QEMU quits; the guest gets no shutdown).
func (m *Machine) PowerOff(ctx context.Context) error {
	return m.power(ctx, "power off", (*pve.VirtualMachine).Stop, func(st *pve.VirtualMachine) bool {
		return st.Status == pve.StatusVirtualMachineStopped
	}, "stopped")
}

// PowerOn starts the VM.
func (m *Machine) PowerOn(ctx context.Context) error {
	return m.power(ctx, "power on", (*pve.VirtualMachine).Start, func(st *pve.VirtualMachine) bool {
		return st.Status == pve.StatusVirtualMachineRunning
	}, "running")
}

// Reset resets the VM hard (system_reset: a cold reboot without shutdown).
func (m *Machine) Reset(ctx context.Context) error {
	return m.power(ctx, "reset", (*pve.VirtualMachine).Reset, nil, "")
}

// Pause suspends the VM to RAM: its vCPUs stop, its memory and devices stay.
func (m *Machine) Pause(ctx context.Context) error {
	return m.power(ctx, "pause", (*pve.VirtualMachine).Pause, func(st *pve.VirtualMachine) bool {
		return st.Status == pve.StatusVirtualMachineRunning && st.QMPStatus == pve.StatusVirtualMachinePaused
	}, "paused")
}

// Resume resumes a paused VM.
func (m *Machine) Resume(ctx context.Context) error {
	return m.power(ctx, "resume", (*pve.VirtualMachine).Resume, func(st *pve.VirtualMachine) bool {
		return st.Status == pve.StatusVirtualMachineRunning &&
			(st.QMPStatus == "" || st.QMPStatus == pve.StatusVirtualMachineRunning)
	}, "running")
}

// SetLink sets the NIC's link up or down (link_down in its netX config).
func (m *Machine) SetLink(ctx context.Context, up bool) error {
	op := fmt.Sprintf("set %s link down", m.nic)
	if up {
		op = fmt.Sprintf("set %s link up", m.nic)
	}

	if err := m.usable(); err != nil {
		return m.opError(op, err)
	}

	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()

	cfg := &pve.VirtualMachineConfig{}
	if err := m.client.Get(ctx, fmt.Sprintf("/nodes/%s/qemu/%d/config", m.node, m.vmid), cfg); err != nil {
		return m.opError(op, fmt.Errorf("reading config: %w", m.explain(ctx, err)))
	}

	cur := cfg.Nets[m.nic]
	if cur == "" {
		return m.opError(op, fmt.Errorf("the VM has no NIC %s (it has: %s)", m.nic, nicList(cfg)))
	}

	opts := []pve.VirtualMachineOption{{Name: m.nic, Value: withLinkDown(cur, !up)}}
	if cfg.Digest != "" {
		opts = append(opts, pve.VirtualMachineOption{Name: "digest", Value: cfg.Digest})
	}

	task, err := m.vm.Config(ctx, opts...)
	if err != nil {
		return m.opError(op, m.explain(ctx, err))
	}

	if task == nil {
		return nil // PVE finished the update before answering (background_delay)
	}

	return m.opError(op, m.wait(ctx, task))
}

// withLinkDown sets (down) or removes (up) link_down in a netX value, keeping
// every other property and their order.
func withLinkDown(value string, down bool) string {
	parts := strings.Split(value, ",")
	out := make([]string, 0, len(parts)+1)
	set := false

	for _, p := range parts {
		if k, _, _ := strings.Cut(p, "="); strings.TrimSpace(k) == "link_down" {
			if down && !set {
				out = append(out, "link_down=1")
				set = true
			}

			continue
		}

		out = append(out, p)
	}

	if down && !set {
		out = append(out, "link_down=1")
	}

	return strings.Join(out, ",")
}

// Close releases the Machine's idle connections. Operations after Close fail.
func (m *Machine) Close() error {
	if m.closed.Swap(true) {
		return nil
	}

	if m.idle != nil {
		m.idle()
	}

	return nil
}

type action func(*pve.VirtualMachine, context.Context) (*pve.Task, error)

// power runs one power action: start the task, wait for it, then check the
// VM's current status with want (if not nil).
func (m *Machine) power(ctx context.Context, op string, act action, want func(*pve.VirtualMachine) bool, state string) error {
	if err := m.usable(); err != nil {
		return m.opError(op, err)
	}

	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()

	task, err := act(m.vm, ctx)
	if err != nil {
		return m.opError(op, m.explain(ctx, err))
	}

	if task == nil {
		return m.opError(op, errors.New("PVE returned no task UPID"))
	}

	if err := m.wait(ctx, task); err != nil {
		return m.opError(op, err)
	}

	if want == nil {
		return nil
	}

	st := &pve.VirtualMachine{}
	if err := m.client.Get(ctx, fmt.Sprintf("/nodes/%s/qemu/%d/status/current", m.node, m.vmid), st); err != nil {
		return m.opError(op, fmt.Errorf("task %q finished, but reading the VM's status failed: %w", task.UPID, m.explain(ctx, err)))
	}

	if !want(st) {
		hint := ""
		if st.HA.Managed != 0 {
			hint = " (the VM is HA-managed: the task only asked the HA manager)"
		}

		return m.opError(op, fmt.Errorf("task %q finished OK, but the VM is not %s: status %q, qmpstatus %q%s",
			task.UPID, state, st.Status, st.QMPStatus, hint))
	}

	return nil
}

// wait polls the task until it stops and checks its exit status.
func (m *Machine) wait(ctx context.Context, task *pve.Task) error {
	delay := pollFirst

	for {
		if err := task.Ping(ctx); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("waiting for task %q (it may still be running): %w", task.UPID, ctx.Err())
			}

			return fmt.Errorf("reading status of task %q: %w", task.UPID, m.explain(ctx, err))
		}

		if task.Status == "stopped" {
			if taskOK(task.ExitStatus) {
				return nil
			}

			status := task.ExitStatus
			if status == "" {
				status = "(no exit status)"
			}

			return &TaskError{UPID: string(task.UPID), Type: task.Type, ExitStatus: status}
		}

		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()

			return fmt.Errorf("waiting for task %q (it may still be running): %w", task.UPID, ctx.Err())
		case <-t.C:
		}

		delay = min(2*delay, pollLast)
	}
}

// taskOK is PVE::Tools::upid_status_is_error negated.
func taskOK(exit string) bool {
	if exit == "OK" {
		return true
	}

	n, found := strings.CutPrefix(exit, "WARNINGS: ")

	return found && n != "" && strings.Trim(n, "0123456789") == ""
}

func (m *Machine) usable() error {
	if m.closed.Load() {
		return errors.New("machine is closed")
	}

	return nil
}

// explain turns go-proxmox's bare errors into ones that say what happened.
func (m *Machine) explain(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	case errors.Is(err, pve.ErrNotAuthorized):
		return fmt.Errorf("API token %q was refused (HTTP 401/403: wrong token ID or secret, or the token lacks privileges on the VM): %w", m.tokenID, err)
	}

	return err
}

func (m *Machine) opError(op string, err error) error {
	if err == nil {
		return nil
	}

	return m.errorf(err, "proxmox: VM %d on node %q: %s: %v", m.vmid, m.node, op, err)
}

// errorf formats an error whose text is scrubbed of the token secret; it
// unwraps to cause (for errors.Is and errors.As).
func (m *Machine) errorf(cause error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if m.secret != "" {
		msg = strings.ReplaceAll(msg, m.secret, "[redacted]")
	}

	return &scrubbedError{msg: msg, cause: cause}
}

type scrubbedError struct {
	msg   string
	cause error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.cause }

func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}

	return context.WithTimeout(ctx, DefaultTimeout)
}

// quietLogger drops go-proxmox's log output.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...any) {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Warnf(string, ...any)  {}
