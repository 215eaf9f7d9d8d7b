// Package proxmox is a fake Proxmox VE API server (net/http/httptest) for the
// endpoints that talchaos's Proxmox provider drives through
// github.com/luthermonson/go-proxmox: node status, a QEMU VM's current status
// and configuration, the power actions (start, stop, reset, suspend, resume)
// and the status of the tasks they start.
//
// It answers the way pveproxy does (pve-http-server, pve-manager, qemu-server,
// pve-access-control), because the client library reads more of the wire than
// the JSON body:
//
//   - Bodies are JSON wrapped as {"data": ...}. An error's text is the HTTP
//     reason phrase ("HTTP/1.1 500 Configuration file
//     'nodes/pve/qemu-server/999.conf' does not exist"), and the body is
//     {"data":null,"message":"...\n"}; go-proxmox turns a 500 into
//     errors.New(res.Status), so the text reaches the caller only through the
//     reason phrase. net/http cannot write a custom reason phrase, so error
//     replies are written on the hijacked connection, with "Connection: close"
//     as pveproxy does for every status >= 400.
//   - A parameter error is a 400 "Parameter verification failed." with
//     {"errors": {"param": "text"}}.
//   - Authentication happens before routing: a missing or wrong
//     "Authorization: PVEAPIToken=<user@realm!name>=<secret>" header gets a 401
//     whose reason phrase is PVE's text ("No ticket", "no such token ...",
//     "invalid token value!") and whose body is empty, like pveproxy for the
//     json format. pveproxy holds every 401 for 3 s; here that delay is
//     WithAuthFailureDelay (0 by default). The secret is never echoed.
//   - Power actions fork a worker: the reply is its UPID,
//     UPID:<node>:<pid %08X>:<pstart %08X>:<starttime %08X>:<type>:<vmid>:<user>:
//     with types qmstart, qmstop, qmreset, qmpause (suspend without todisk),
//     qmresume and qmconfig (asynchronous config update). Checks PVE makes
//     before forking fail the request itself (reset, suspend or resume of a VM
//     that is not running: 500 "VM 100 not running"); checks made in the worker
//     fail the task (start of a running VM: exit status "VM 100 already
//     running"; any action on a locked VM: "VM is locked (backup)").
//   - GET /nodes/{node}/tasks/{upid}/status answers status "running" until the
//     task is done, then "stopped" with "exitstatus": "OK" or the error text. A
//     task is done once it has been polled more than WithTaskPolls times
//     (default 1: the first poll sees "running") and WithTaskDuration has
//     passed since it started. Its effect on the VM is applied when it is done,
//     so a client that does not wait for the task does not see the new state.
//   - An unknown node is a 500 "hostname lookup '<node>' failed - ..." (PVE
//     cannot resolve the node it would proxy to); an unknown path or method is
//     a 501 "Method 'GET /...' not implemented".
//
// The server records every request it receives (Requests, RequestLog) and the
// tasks it has started (Tasks), so tests can assert that a client waited.
package proxmox

import (
	"crypto/sha1" //nolint:gosec // PVE's config digest is SHA-1
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults for the API token the server accepts.
const (
	DefaultTokenID     = "root@pam!talchaos"
	DefaultTokenSecret = "5e0f1b8c-3a52-4c1d-9d0e-7f3b2a1c9e44"
)

// BasePath is where pveproxy serves the JSON API.
const BasePath = "/api2/json"

// VM run states, as VMState.State reports them.
const (
	StateRunning = "running"
	StatePaused  = "paused"
	StateStopped = "stopped"
)

// Option configures a Server.
type Option func(*Server)

// WithToken sets the API token the server accepts: tokenID is
// "user@realm!tokenname".
func WithToken(tokenID, secret string) Option {
	return func(s *Server) { s.tokenID, s.secret = tokenID, secret }
}

// WithTLS serves HTTPS with httptest's self-signed certificate, as pveproxy
// serves on port 8006. Client returns an *http.Client that trusts it.
func WithTLS() Option {
	return func(s *Server) { s.tls = true }
}

// WithTaskPolls sets how many status polls a task answers "running" before
// it is done (default 1). A negative n keeps tasks running forever.
func WithTaskPolls(n int) Option {
	return func(s *Server) { s.taskPolls = n }
}

// WithTaskDuration sets the least time a task runs (default 0).
func WithTaskDuration(d time.Duration) Option {
	return func(s *Server) { s.taskDuration = d }
}

// WithAuthFailureDelay holds every 401 for d, as pveproxy does for 3 s.
func WithAuthFailureDelay(d time.Duration) Option {
	return func(s *Server) { s.authDelay = d }
}

// Server is a fake Proxmox VE API.
type Server struct {
	srv     *httptest.Server
	tls     bool
	tokenID string
	secret  string

	authDelay time.Duration
	closing   chan struct{}
	closeOnce sync.Once

	mu           sync.Mutex
	nodes        map[string]bool
	vms          map[vmKey]*vm
	tasks        map[string]*task
	taskOrder    []string
	taskPolls    int
	taskDuration time.Duration
	failNext     []string
	requests     []Request
	nextPID      int
	macSeq       int
	boot         time.Time
}

type vmKey struct {
	node string
	vmid int
}

type vm struct {
	node      string
	vmid      int
	status    string // running, stopped
	qmpstatus string // running, paused, stopped
	config    map[string]string
	started   time.Time
	pid       int
	resets    int
}

// NewServer starts a fake PVE API with no nodes and no VMs.
func NewServer(opts ...Option) *Server {
	s := &Server{
		tokenID:   DefaultTokenID,
		secret:    DefaultTokenSecret,
		closing:   make(chan struct{}),
		nodes:     map[string]bool{},
		vms:       map[vmKey]*vm{},
		tasks:     map[string]*task{},
		taskPolls: 1,
		nextPID:   0x3a00,
		boot:      time.Now().Add(-36 * time.Hour),
	}

	for _, o := range opts {
		o(s)
	}

	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	// TLS handshake failures (a client refusing the self-signed certificate)
	// are expected in tests; keep them out of the output.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)

	if s.tls {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}

	return s
}

// URL is the API base URL, e.g. http://127.0.0.1:41234/api2/json, as
// go-proxmox's NewClient takes it.
func (s *Server) URL() string { return s.srv.URL + BasePath }

// Client is an *http.Client for the server (it trusts the TLS certificate
// under WithTLS). Close closes its idle connections.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// TokenID is the API token ID the server accepts.
func (s *Server) TokenID() string { return s.tokenID }

// TokenSecret is the API token secret the server accepts.
func (s *Server) TokenSecret() string { return s.secret }

// Close stops the server, cutting short any delayed 401, and waits for the
// requests in flight.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.srv.Close()
	})
}

// AddNode adds a cluster node with no VMs.
func (s *Server) AddNode(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.nodes[node] = true
}

// AddVM adds a QEMU VM on node (adding the node too), running or stopped,
// with a typical Talos VM config whose net0 is
// "virtio=BC:24:11:00:00:NN,bridge=vmbr0,firewall=1" (NN counts the VMs
// added). An existing VM is replaced.
func (s *Server) AddVM(node string, vmid int, running bool) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.nodes[node] = true
	s.macSeq++

	v := &vm{
		node: node,
		vmid: vmid,
		config: map[string]string{
			"agent":   "1",
			"boot":    "order=scsi0;net0",
			"cores":   "2",
			"cpu":     "x86-64-v2-AES",
			"memory":  "4096",
			"meta":    "creation-qemu=9.0.2,ctime=1718000000",
			"name":    fmt.Sprintf("talos-%d", vmid),
			"net0":    fmt.Sprintf("virtio=BC:24:11:%02X:%02X:%02X,bridge=vmbr0,firewall=1", s.macSeq>>16&0xff, s.macSeq>>8&0xff, s.macSeq&0xff),
			"numa":    "0",
			"onboot":  "1",
			"ostype":  "l26",
			"scsi0":   fmt.Sprintf("local-lvm:vm-%d-disk-0,iothread=1,size=32G", vmid),
			"scsihw":  "virtio-scsi-single",
			"smbios1": fmt.Sprintf("uuid=6f1b2c3d-0000-4000-8000-%012d", vmid),
			"sockets": "1",
			"vmgenid": fmt.Sprintf("0b6e3c1a-0000-4000-8000-%012d", vmid),
		},
	}
	v.setRunState(running)
	if running {
		v.pid = s.allocPID()
	}

	s.vms[vmKey{node, vmid}] = v
}

// SetConfig sets (or, with value "", deletes) one key of a VM's config, e.g.
// "lock" to "backup" or "net1" to a second NIC.
func (s *Server) SetConfig(node string, vmid int, key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	v := s.vms[vmKey{node, vmid}]
	if v == nil {
		panic(fmt.Sprintf("fake proxmox: no VM %d on node %s", vmid, node))
	}

	if value == "" {
		delete(v.config, key)
	} else {
		v.config[key] = value
	}
}

// SetLock sets the VM's config lock ("backup", "migrate", "snapshot", ...;
// "" clears it), with which PVE refuses power actions and config changes.
func (s *Server) SetLock(node string, vmid int, lock string) {
	s.SetConfig(node, vmid, "lock", lock)
}

// VMState is a VM as the fake holds it.
type VMState struct {
	Exists    bool
	Node      string
	VMID      int
	State     string            // StateRunning, StatePaused or StateStopped
	Status    string            // "status" of status/current: running or stopped
	QMPStatus string            // "qmpstatus": running, paused or stopped
	Config    map[string]string // a copy of the config, without digest
	Digest    string            // the config digest PVE would report
	Resets    int               // resets done (a reset changes no other state)
}

// VM returns a VM's state (Exists false if there is none).
func (s *Server) VM(node string, vmid int) VMState {
	s.mu.Lock()
	defer s.mu.Unlock()

	v := s.vms[vmKey{node, vmid}]
	if v == nil {
		return VMState{Node: node, VMID: vmid}
	}

	st := VMState{
		Exists: true, Node: node, VMID: vmid,
		Status: v.status, QMPStatus: v.qmpstatus,
		Config: maps.Clone(v.config), Digest: v.digest(), Resets: v.resets,
	}

	switch {
	case v.status == "stopped":
		st.State = StateStopped
	case v.qmpstatus == "paused":
		st.State = StatePaused
	default:
		st.State = StateRunning
	}

	return st
}

// FailNextTask makes the next task the server starts end with exitstatus
// (e.g. "VM is locked (backup)") instead of doing its work. Calls queue up.
func (s *Server) FailNextTask(exitstatus string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.failNext = append(s.failNext, exitstatus)
}

// SetTaskTiming changes WithTaskPolls and WithTaskDuration for tasks started
// from now on.
func (s *Server) SetTaskTiming(polls int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.taskPolls, s.taskDuration = polls, d
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string            // decoded URL path, e.g. /api2/json/nodes/pve/status
	Query  string            // raw query string
	Params map[string]string // body parameters (JSON or form), values as strings
	Status int               // HTTP status answered
}

// String is "METHOD /path[?query]".
func (r Request) String() string {
	if r.Query != "" {
		return r.Method + " " + r.Path + "?" + r.Query
	}

	return r.Method + " " + r.Path
}

// Requests lists the requests received so far as "METHOD /path[?query]".
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()

	out := make([]string, len(s.requests))
	for i, r := range s.requests {
		out[i] = r.String()
	}

	return out
}

// RequestLog lists the requests received so far in full.
func (s *Server) RequestLog() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()

	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Params = maps.Clone(r.Params)
		out[i] = r
	}

	return out
}

// ResetRequests forgets the requests received so far.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.requests = nil
}

// Task is a worker task as the fake holds it.
type Task struct {
	UPID       string
	Node       string
	Type       string // qmstart, qmstop, qmreset, qmpause, qmresume, qmconfig
	ID         string // the VMID
	User       string // the token ID that started it
	Polls      int    // status requests answered
	Done       bool
	ExitStatus string // "OK" or the error, once Done
}

// Tasks lists the tasks started so far, oldest first.
func (s *Server) Tasks() []Task {
	s.mu.Lock()
	defer s.mu.Unlock()

	out := make([]Task, 0, len(s.taskOrder))
	for _, upid := range s.taskOrder {
		t := s.tasks[upid]
		out = append(out, Task{
			UPID: t.upid, Node: t.node, Type: t.typ, ID: t.id, User: t.user,
			Polls: t.polls, Done: t.done, ExitStatus: t.exit,
		})
	}

	return out
}

func (v *vm) setRunState(running bool) {
	if running {
		v.status, v.qmpstatus = "running", "running"
		v.started = time.Now()
	} else {
		v.status, v.qmpstatus = "stopped", "stopped"
		v.pid = 0
	}
}

// digest is the SHA-1 of the config as PVE would write it.
func (v *vm) digest() string {
	h := sha1.New() //nolint:gosec // PVE's config digest is SHA-1

	for _, k := range slices.Sorted(maps.Keys(v.config)) {
		fmt.Fprintf(h, "%s: %s\n", k, v.config[k])
	}

	return hex.EncodeToString(h.Sum(nil))
}

func (s *Server) allocPID() int {
	s.nextPID += 7

	return s.nextPID
}

// lockErr is AbstractConfig::check_lock's error, or "".
func (v *vm) lockErr() string {
	if l := v.config["lock"]; l != "" {
		return fmt.Sprintf("VM is locked (%s)", l)
	}

	return ""
}

func configPath(node string, vmid int) string {
	return fmt.Sprintf("nodes/%s/qemu-server/%d.conf", node, vmid)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimRight(s, "\n"), "\n")

	return strings.TrimRight(s, "\r")
}
