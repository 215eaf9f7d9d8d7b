package proxmox

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pve "github.com/luthermonson/go-proxmox"

	fake "github.com/talchaos/talchaos/fakes/proxmox"
)

// secret is the token secret every test uses: it must never show in an error.
const secret = "9c1f3a7e-5b2d-4e8f-a6c0-d3b1e2f4a5c6"

func init() {
	pollFirst, pollLast = 5*time.Millisecond, 20*time.Millisecond
}

// errs collects every error the tests see, for TestNoSecretInErrors.
var errs struct {
	sync.Mutex
	list []error
}

func seen(err error) error {
	if err != nil {
		errs.Lock()
		errs.list = append(errs.list, err)
		errs.Unlock()
	}

	return err
}

type env struct {
	srv *fake.Server
	cfg Config
}

func newEnv(t *testing.T, opts ...fake.Option) *env {
	t.Helper()

	s := fake.NewServer(append([]fake.Option{fake.WithToken("talchaos@pve!chaos", secret)}, opts...)...)
	t.Cleanup(s.Close)
	s.AddVM("pve", 100, true)
	s.AddVM("pve2", 200, false)

	return &env{srv: s, cfg: Config{URL: s.URL(), TokenID: s.TokenID(), TokenSecret: secret, HTTPClient: s.Client()}}
}

func (e *env) open(t *testing.T, vm VM) *Machine {
	t.Helper()

	m, err := Open(context.Background(), e.cfg, vm)
	if err != nil {
		t.Fatalf("Open: %v", seen(err))
	}

	t.Cleanup(func() { m.Close() })

	return m
}

func TestPower(t *testing.T) {
	tests := []struct {
		name      string
		node      string
		vmid      int
		prepare   func(*fake.Server)
		op        func(*Machine, context.Context) error
		wantState string
		wantTask  string
		wantReq   string
		wantReset int
	}{
		{
			name: "power off", node: "pve", vmid: 100, op: (*Machine).PowerOff,
			wantState: fake.StateStopped, wantTask: "qmstop", wantReq: "POST /api2/json/nodes/pve/qemu/100/status/stop",
		},
		{
			name: "power on", node: "pve2", vmid: 200, op: (*Machine).PowerOn,
			wantState: fake.StateRunning, wantTask: "qmstart", wantReq: "POST /api2/json/nodes/pve2/qemu/200/status/start",
		},
		{
			name: "reset", node: "pve", vmid: 100, op: (*Machine).Reset,
			wantState: fake.StateRunning, wantTask: "qmreset", wantReq: "POST /api2/json/nodes/pve/qemu/100/status/reset",
			wantReset: 1,
		},
		{
			name: "pause", node: "pve", vmid: 100, op: (*Machine).Pause,
			wantState: fake.StatePaused, wantTask: "qmpause", wantReq: "POST /api2/json/nodes/pve/qemu/100/status/suspend",
		},
		{
			name: "resume", node: "pve", vmid: 100, op: (*Machine).Resume,
			prepare:   pauseVM("pve", 100),
			wantState: fake.StateRunning, wantTask: "qmresume", wantReq: "POST /api2/json/nodes/pve/qemu/100/status/resume",
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fake.WithTaskPolls(2))
			if tt.prepare != nil {
				tt.prepare(e.srv)
			}

			m := e.open(t, VM{Node: tt.node, VMID: tt.vmid})
			e.srv.ResetRequests()

			if err := tt.op(m, context.Background()); err != nil {
				t.Fatalf("%s: %v", tt.name, seen(err))
			}

			st := e.srv.VM(tt.node, tt.vmid)
			if st.State != tt.wantState || st.Resets != tt.wantReset {
				t.Fatalf("VM is %s with %d resets, want %s with %d", st.State, st.Resets, tt.wantState, tt.wantReset)
			}

			task := lastTask(t, e.srv)
			if task.Type != tt.wantTask || !task.Done || task.ExitStatus != "OK" {
				t.Fatalf("task %+v, want a finished %s", task, tt.wantTask)
			}

			// The fake answers "running" to the first two polls: the call
			// must have kept polling until the third said "stopped".
			if task.Polls != 3 {
				t.Fatalf("task polled %d times, want 3 (two running, one stopped)", task.Polls)
			}

			reqs := e.srv.Requests()
			if reqs[0] != tt.wantReq {
				t.Fatalf("first request %q, want %q", reqs[0], tt.wantReq)
			}

			polls := 0
			for _, r := range reqs {
				if strings.HasSuffix(r, "/status") && strings.Contains(r, "/tasks/"+task.UPID) {
					polls++
				}
			}

			if polls != 3 {
				t.Fatalf("requests %q: %d task status polls, want 3", reqs, polls)
			}
		})
	}
}

func pauseVM(node string, vmid int) func(*fake.Server) {
	return func(s *fake.Server) {
		m, err := Open(context.Background(), Config{URL: s.URL(), TokenID: s.TokenID(), TokenSecret: s.TokenSecret(), HTTPClient: s.Client()}, VM{Node: node, VMID: vmid})
		if err == nil {
			err = m.Pause(context.Background())
			m.Close()
		}

		if err != nil || s.VM(node, vmid).State != fake.StatePaused {
			panic("cannot pause the VM: " + seen(err).Error())
		}
	}
}

func lastTask(t *testing.T, s *fake.Server) fake.Task {
	t.Helper()

	tasks := s.Tasks()
	if len(tasks) == 0 {
		t.Fatal("no task was started")
	}

	return tasks[len(tasks)-1]
}

func TestWaitCoversTaskDuration(t *testing.T) {
	e := newEnv(t, fake.WithTaskPolls(0), fake.WithTaskDuration(150*time.Millisecond))
	m := e.open(t, VM{Node: "pve", VMID: 100})

	start := time.Now()
	if err := m.PowerOff(context.Background()); err != nil {
		t.Fatal(seen(err))
	}

	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("PowerOff returned after %v, before the task's 150ms were up", el)
	}

	if st := e.srv.VM("pve", 100).State; st != fake.StateStopped {
		t.Fatalf("VM is %s", st)
	}
}

func TestSetLink(t *testing.T) {
	const nic1 = "e1000=BC:24:11:AA:BB:CC,bridge=vmbr1,link_down=0,tag=30,firewall=0"

	tests := []struct {
		name  string
		nic   string
		start string // NIC value before, "" for the default net0
		steps []bool // SetLink arguments, in order
		want  []string
	}{
		{
			name: "net0 down then up", steps: []bool{false, true},
			want: []string{
				"virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1,link_down=1",
				"virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1",
			},
		},
		{
			name: "down twice is idempotent", steps: []bool{false, false},
			want: []string{
				"virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1,link_down=1",
				"virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1,link_down=1",
			},
		},
		{
			name: "net1 with link_down in the middle", nic: "net1", start: nic1, steps: []bool{false, true},
			want: []string{
				"e1000=BC:24:11:AA:BB:CC,bridge=vmbr1,link_down=1,tag=30,firewall=0",
				"e1000=BC:24:11:AA:BB:CC,bridge=vmbr1,tag=30,firewall=0",
			},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)

			nic := tt.nic
			if nic == "" {
				nic = "net0"
			}

			if tt.start != "" {
				e.srv.SetConfig("pve", 100, nic, tt.start)
			}

			m := e.open(t, VM{Node: "pve", VMID: 100, NIC: tt.nic})

			for i, up := range tt.steps {
				before := e.srv.VM("pve", 100)
				e.srv.ResetRequests()

				if err := m.SetLink(context.Background(), up); err != nil {
					t.Fatalf("SetLink(%v): %v", up, seen(err))
				}

				after := e.srv.VM("pve", 100)
				if got := after.Config[nic]; got != tt.want[i] {
					t.Fatalf("step %d: %s = %q, want %q", i, nic, got, tt.want[i])
				}

				// Nothing but the NIC changed, and the VM kept running.
				delete(before.Config, nic)
				delete(after.Config, nic)

				if !maps.Equal(before.Config, after.Config) || after.State != fake.StateRunning {
					t.Fatalf("step %d: config %v -> %v, state %s", i, before.Config, after.Config, after.State)
				}

				// One config update, carrying only the NIC and the digest read
				// just before, and its task waited for.
				var posts []fake.Request
				for _, r := range e.srv.RequestLog() {
					if r.Method == http.MethodPost {
						posts = append(posts, r)
					}
				}

				if len(posts) != 1 || posts[0].Path != "/api2/json/nodes/pve/qemu/100/config" {
					t.Fatalf("step %d: POSTs %v", i, posts)
				}

				if keys := slices.Sorted(maps.Keys(posts[0].Params)); !slices.Equal(keys, []string{"digest", nic}) ||
					posts[0].Params["digest"] != before.Digest {
					t.Fatalf("step %d: config update params %v (digest before %s)", i, posts[0].Params, before.Digest)
				}

				if task := lastTask(t, e.srv); task.Type != "qmconfig" || !task.Done || task.ExitStatus != "OK" {
					t.Fatalf("step %d: task %+v", i, task)
				}
			}
		})
	}
}

func TestWithLinkDown(t *testing.T) {
	tests := []struct {
		in   string
		down bool
		want string
	}{
		{"virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1", true, "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1,link_down=1"},
		{"virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1", false, "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1"},
		{"virtio=BC:24:11:00:00:01,link_down=0,bridge=vmbr0", true, "virtio=BC:24:11:00:00:01,link_down=1,bridge=vmbr0"},
		{"virtio=BC:24:11:00:00:01,link_down=1,bridge=vmbr0", false, "virtio=BC:24:11:00:00:01,bridge=vmbr0"},
		{"virtio=BC:24:11:00:00:01,link_down=1,link_down=1", true, "virtio=BC:24:11:00:00:01,link_down=1"},
		{"virtio,bridge=vmbr0,tag=5,trunks=10;20", true, "virtio,bridge=vmbr0,tag=5,trunks=10;20,link_down=1"},
	}

	for _, tt := range tests {
		if got := withLinkDown(tt.in, tt.down); got != tt.want {
			t.Errorf("withLinkDown(%q, %v) = %q, want %q", tt.in, tt.down, got, tt.want)
		}
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(*fake.Server)
		op      func(*Machine, context.Context) error
		want    []string // substrings of the error
		task    bool     // the error is a *TaskError
		state   string   // the VM's state afterwards
	}{
		{
			name:    "failed task",
			prepare: func(s *fake.Server) { s.FailNextTask("VM is locked (backup)") },
			op:      (*Machine).PowerOff,
			want:    []string{"VM 100 on node \"pve\": power off: ", "VM is locked (backup)", "UPID:pve:"},
			task:    true, state: fake.StateRunning,
		},
		{
			name:    "locked VM fails in the worker",
			prepare: func(s *fake.Server) { s.SetLock("pve", 100, "backup") },
			op:      (*Machine).Reset,
			want:    []string{"VM 100 on node \"pve\": reset: ", "VM is locked (backup)"},
			task:    true, state: fake.StateRunning,
		},
		{
			name:    "locked VM refuses a config update",
			prepare: func(s *fake.Server) { s.SetLock("pve", 100, "migrate") },
			op:      func(m *Machine, ctx context.Context) error { return m.SetLink(ctx, false) },
			want:    []string{": set net0 link down: ", "500 VM is locked (migrate)"},
			state:   fake.StateRunning,
		},
		{
			name: "start of a running VM",
			op:   (*Machine).PowerOn,
			want: []string{": power on: ", "VM 100 already running"},
			task: true, state: fake.StateRunning,
		},
		{
			name:    "resume of a stopped VM",
			prepare: func(s *fake.Server) { s.AddVM("pve", 100, false) },
			op:      (*Machine).Resume,
			want:    []string{": resume: ", "500 VM 100 not running"},
			state:   fake.StateStopped,
		},
		{
			name:    "config changed under SetLink",
			prepare: func(s *fake.Server) { s.FailNextTask("checksum mismatch (file change by other user?)") },
			op:      func(m *Machine, ctx context.Context) error { return m.SetLink(ctx, false) },
			want:    []string{"checksum mismatch"},
			task:    true, state: fake.StateRunning,
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			m := e.open(t, VM{Node: "pve", VMID: 100})

			if tt.prepare != nil {
				tt.prepare(e.srv)
			}

			err := seen(tt.op(m, context.Background()))
			if err == nil {
				t.Fatal("no error")
			}

			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}

			var te *TaskError
			if errors.As(err, &te) != tt.task {
				t.Errorf("error %v: *TaskError=%v, want %v", err, !tt.task, tt.task)
			}

			if st := e.srv.VM("pve", 100).State; st != tt.state {
				t.Errorf("VM is %s, want %s", st, tt.state)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config, *VM)
		want   []string
		is     error
	}{
		{
			name:   "wrong secret",
			mutate: func(c *Config, _ *VM) { c.TokenSecret = "00000000-0000-0000-0000-000000000000" },
			want:   []string{"VM 100 on node \"pve\"", "talchaos@pve!chaos", "refused", "not authorized"},
			is:     pve.ErrNotAuthorized,
		},
		{
			name:   "wrong token ID",
			mutate: func(c *Config, _ *VM) { c.TokenID = "talchaos@pve!other" },
			want:   []string{"talchaos@pve!other", "refused"},
			is:     pve.ErrNotAuthorized,
		},
		{
			name:   "unknown VM",
			mutate: func(_ *Config, v *VM) { v.VMID = 999 },
			want:   []string{"VM 999 on node \"pve\"", "Configuration file 'nodes/pve/qemu-server/999.conf' does not exist"},
		},
		{
			name:   "VM on another node",
			mutate: func(_ *Config, v *VM) { v.VMID = 200 },
			want:   []string{"VM 200 on node \"pve\"", "does not exist"},
		},
		{
			name:   "unknown node",
			mutate: func(_ *Config, v *VM) { v.Node = "pve9" },
			want:   []string{"node \"pve9\"", "hostname lookup 'pve9' failed"},
		},
		{
			name:   "missing NIC",
			mutate: func(_ *Config, v *VM) { v.NIC = "net3" },
			want:   []string{"VM 100 on node \"pve\" has no NIC net3 (it has: net0)"},
		},
		{
			name:   "malformed token ID",
			mutate: func(c *Config, _ *VM) { c.TokenID = "chaos" },
			want:   []string{"\"chaos\" is not of the form user@realm!tokenname"},
		},
		{
			name:   "no secret",
			mutate: func(c *Config, _ *VM) { c.TokenSecret = "" },
			want:   []string{"has no secret"},
		},
		{
			name: "unreachable URL with the secret in it",
			mutate: func(c *Config, _ *VM) {
				c.URL = "http://127.0.0.1:1/" + secret
				c.HTTPClient = nil
			},
			want: []string{"node \"pve\"", "[redacted]"},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			cfg, vm := e.cfg, VM{Node: "pve", VMID: 100}
			tt.mutate(&cfg, &vm)

			m, err := Open(context.Background(), cfg, vm)
			if err == nil {
				m.Close()
				t.Fatal("Open succeeded")
			}

			seen(err)

			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}

			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
		})
	}
}

func TestContextCancelWhileTaskRuns(t *testing.T) {
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		is   error
	}{
		{
			name: "cancel",
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(100*time.Millisecond, cancel)

				return ctx, cancel
			},
			is: context.Canceled,
		},
		{
			name: "deadline",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 100*time.Millisecond)
			},
			is: context.DeadlineExceeded,
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fake.WithTaskPolls(-1)) // tasks never end
			m := e.open(t, VM{Node: "pve", VMID: 100})

			// Slow polling, so that a wait that ignored ctx would show.
			pollFirst, pollLast = time.Hour, time.Hour
			defer func() { pollFirst, pollLast = 5*time.Millisecond, 20*time.Millisecond }()

			ctx, cancel := tt.ctx()
			defer cancel()

			start := time.Now()
			err := seen(m.PowerOff(ctx))

			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("PowerOff returned after %v", el)
			}

			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), "may still be running") {
				t.Fatalf("error %v, want %v", err, tt.is)
			}

			if task := lastTask(t, e.srv); task.Done {
				t.Fatalf("task %+v is done", task)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	e := newEnv(t, fake.WithTLS())

	cfg := e.cfg
	cfg.HTTPClient = nil
	cfg.URL = strings.TrimSuffix(cfg.URL, "/api2/json") + "/" // Open adds /api2/json

	if _, err := Open(context.Background(), cfg, VM{Node: "pve", VMID: 100}); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Open without InsecureSkipVerify against a self-signed certificate: %v", seen(err))
	} else {
		seen(err)
	}

	cfg.InsecureSkipVerify = true

	m, err := Open(context.Background(), cfg, VM{Node: "pve", VMID: 100})
	if err != nil {
		t.Fatal(seen(err))
	}

	defer m.Close()

	if err := m.SetLink(context.Background(), false); err != nil {
		t.Fatal(seen(err))
	}
}

func TestClosed(t *testing.T) {
	e := newEnv(t)
	m := e.open(t, VM{Node: "pve", VMID: 100})

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	if err := seen(m.PowerOff(context.Background())); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("PowerOff after Close: %v", err)
	}

	if st := e.srv.VM("pve", 100).State; st != fake.StateRunning {
		t.Fatalf("VM is %s", st)
	}
}

func TestConcurrentUse(t *testing.T) {
	e := newEnv(t)
	m := e.open(t, VM{Node: "pve", VMID: 100})

	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)

		go func() {
			defer wg.Done()

			if err := m.Reset(context.Background()); err != nil {
				t.Error(seen(err))
			}
		}()
	}

	wg.Wait()

	if st := e.srv.VM("pve", 100); st.Resets != 4 {
		t.Fatalf("%d resets", st.Resets)
	}
}

// TestNoSecretInErrors provokes every kind of failure the package reports,
// and greps their texts, and those of all errors the other tests saw, for
// the token secret.
func TestNoSecretInErrors(t *testing.T) {
	e := newEnv(t, fake.WithTLS())
	m := e.open(t, VM{Node: "pve", VMID: 100})

	provoke := map[string]func() error{
		"failed task": func() error {
			e.srv.FailNextTask("VM is locked (backup)")

			return m.PowerOff(context.Background())
		},
		"refused request": func() error {
			e.srv.AddVM("pve", 100, false)

			return m.Resume(context.Background())
		},
		"wrong secret": func() error {
			cfg := e.cfg
			cfg.TokenSecret = secret[:len(secret)-1] + "0"

			return openErr(cfg, VM{Node: "pve", VMID: 100})
		},
		"unknown VM":   func() error { return openErr(e.cfg, VM{Node: "pve", VMID: 4242}) },
		"unknown node": func() error { return openErr(e.cfg, VM{Node: "nowhere", VMID: 100}) },
		"TLS failure": func() error {
			cfg := e.cfg
			cfg.HTTPClient = nil

			return openErr(cfg, VM{Node: "pve", VMID: 100})
		},
		"secret in the URL": func() error {
			cfg := e.cfg
			cfg.URL += "?token=" + secret

			return openErr(cfg, VM{Node: "pve", VMID: 4242})
		},
		"cancelled wait": func() error {
			e.srv.SetTaskTiming(-1, 0)
			defer e.srv.SetTaskTiming(1, 0)

			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()

			return m.SetLink(ctx, false)
		},
	}

	for name, f := range provoke {
		err := f()
		if err == nil {
			t.Errorf("%s: no error", name)

			continue
		}

		seen(err)
	}

	errs.Lock()
	defer errs.Unlock()

	for _, err := range errs.list {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error contains the token secret: %q", err)
		}

		// Nor its first half, in case something truncated or split it.
		if strings.Contains(err.Error(), secret[:18]) {
			t.Errorf("error contains part of the token secret: %q", err)
		}
	}
}

func openErr(cfg Config, vm VM) error {
	m, err := Open(context.Background(), cfg, vm)
	if err == nil {
		m.Close()
	}

	return err
}
