package proxmox_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	pve "github.com/luthermonson/go-proxmox"

	"github.com/talchaos/talchaos/fakes/proxmox"
)

// call makes one raw request and returns the status line's "code reason",
// whether the server closes the connection, and the decoded body (nil if
// empty).
func call(t *testing.T, s *proxmox.Server, method, path, auth string, body url.Values) (string, bool, map[string]any) {
	t.Helper()

	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(body.Encode())
	}

	req, err := http.NewRequestWithContext(context.Background(), method, s.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}

	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}

	if auth != "" {
		req.Header.Set("Authorization", auth)
	}

	res, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()

	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}

	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: body %q is not JSON: %v", method, path, raw, err)
		}
	}

	return res.Status, res.Close, out
}

func goodAuth(s *proxmox.Server) string {
	return "PVEAPIToken=" + s.TokenID() + "=" + s.TokenSecret()
}

func newServer(t *testing.T, opts ...proxmox.Option) *proxmox.Server {
	t.Helper()

	s := proxmox.NewServer(opts...)
	t.Cleanup(s.Close)
	s.AddVM("pve", 100, true)
	s.AddVM("pve", 101, false)

	return s
}

func TestWireShapes(t *testing.T) {
	s := newServer(t)
	auth := goodAuth(s)

	tests := []struct {
		name       string
		method     string
		path       string
		auth       string
		body       url.Values
		wantStatus string
		wantBody   map[string]any // keys that must be there with these values
		wantEmpty  bool
	}{
		{
			name: "no auth header", method: "GET", path: "/nodes/pve/status",
			wantStatus: "401 No ticket", wantEmpty: true,
		},
		{
			name: "wrong secret", method: "GET", path: "/nodes/pve/status",
			auth:       "PVEAPIToken=" + s.TokenID() + "=00000000-0000-0000-0000-000000000000",
			wantStatus: "401 invalid token value!", wantEmpty: true,
		},
		{
			name: "wrong token name", method: "GET", path: "/nodes/pve/status",
			auth:       "PVEAPIToken=root@pam!other=" + s.TokenSecret(),
			wantStatus: "401 no such token 'other' for user 'root@pam'", wantEmpty: true,
		},
		{
			name: "unknown VM", method: "GET", path: "/nodes/pve/qemu/999/status/current", auth: auth,
			wantStatus: "500 Configuration file 'nodes/pve/qemu-server/999.conf' does not exist",
			wantBody:   map[string]any{"data": nil, "message": "Configuration file 'nodes/pve/qemu-server/999.conf' does not exist\n"},
		},
		{
			name: "unknown node", method: "GET", path: "/nodes/nope/status", auth: auth,
			wantStatus: "500 hostname lookup 'nope' failed - failed to get address info for: nope: Name or service not known",
		},
		{
			name: "unknown path", method: "GET", path: "/nodes/pve/qemu/100/rrd", auth: auth,
			wantStatus: "501 Method 'GET /nodes/pve/qemu/100/rrd' not implemented",
		},
		{
			name: "reset of a stopped VM", method: "POST", path: "/nodes/pve/qemu/101/status/reset", auth: auth,
			wantStatus: "500 VM 101 not running",
		},
		{
			name: "unknown parameter", method: "POST", path: "/nodes/pve/qemu/100/status/stop", auth: auth,
			body:       url.Values{"bogus": {"1"}},
			wantStatus: "400 Parameter verification failed.",
			wantBody: map[string]any{"errors": map[string]any{
				"bogus": "property is not defined in schema and the schema does not allow additional properties",
			}},
		},
		{
			name: "config digest mismatch", method: "POST", path: "/nodes/pve/qemu/100/config", auth: auth,
			body:       url.Values{"net0": {"virtio=BC:24:11:00:00:01,bridge=vmbr0"}, "digest": {strings.Repeat("0", 40)}},
			wantStatus: "500 checksum mismatch (file change by other user?)",
		},
		{
			name: "bad net value", method: "POST", path: "/nodes/pve/qemu/100/config", auth: auth,
			body:       url.Values{"net0": {"virtio=BC:24:11:00:00:01,bridge=vmbr0,link_down=maybe"}},
			wantStatus: "400 Parameter verification failed.",
		},
		{
			name: "unknown task", method: "GET", path: "/nodes/pve/tasks/UPID:pve:00000001:00000001:00000001:qmstop:100:root@pam!talchaos:/status", auth: auth,
			wantStatus: "400 Parameter verification failed.",
			wantBody:   map[string]any{"errors": map[string]any{"upid": "no such task"}},
		},
		{
			name: "bad vmid", method: "GET", path: "/nodes/pve/qemu/abc/config", auth: auth,
			wantStatus: "400 Parameter verification failed.",
			wantBody:   map[string]any{"errors": map[string]any{"vmid": "type check ('integer') failed - got 'abc'"}},
		},
		{
			name: "node status", method: "GET", path: "/nodes/pve/status", auth: auth,
			wantStatus: "200 OK",
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, conn, body := call(t, s, tt.method, tt.path, tt.auth, tt.body)
			if status != tt.wantStatus {
				t.Fatalf("status %q, want %q", status, tt.wantStatus)
			}

			if strings.HasPrefix(status, "200") {
				if _, ok := body["data"]; !ok {
					t.Fatalf("body %v has no data key", body)
				}

				return
			}

			if !conn {
				t.Errorf("no Connection: close on an error")
			}

			if tt.wantEmpty && body != nil {
				t.Errorf("body %v, want none", body)
			}

			for k, v := range tt.wantBody {
				got, _ := json.Marshal(body[k])
				want, _ := json.Marshal(v)

				if string(got) != string(want) {
					t.Errorf("body[%s] = %s, want %s", k, got, want)
				}
			}

			raw, _ := json.Marshal(body)
			if strings.Contains(status+string(raw), s.TokenSecret()) {
				t.Errorf("the reply echoes the token secret")
			}
		})
	}
}

var upidRE = regexp.MustCompile(`^UPID:pve:[0-9A-F]{8}:[0-9A-F]{8}:[0-9A-F]{8}:qmstop:100:root@pam!talchaos:$`)

func TestTaskLifecycle(t *testing.T) {
	s := newServer(t, proxmox.WithTaskPolls(2))
	auth := goodAuth(s)

	status, _, body := call(t, s, "POST", "/nodes/pve/qemu/100/status/stop", auth, nil)
	if status != "200 OK" {
		t.Fatalf("stop: %s", status)
	}

	upid, _ := body["data"].(string)
	if !upidRE.MatchString(upid) {
		t.Fatalf("UPID %q is not in PVE's format", upid)
	}

	for poll := 1; poll <= 3; poll++ {
		if st := s.VM("pve", 100).State; st != proxmox.StateRunning {
			t.Fatalf("before poll %d the VM is %s: the stop took effect before the task ended", poll, st)
		}

		_, _, body = call(t, s, "GET", "/nodes/pve/tasks/"+upid+"/status", auth, nil)
		d, _ := body["data"].(map[string]any)

		want := "running"
		if poll == 3 {
			want = "stopped"
		}

		if d["status"] != want {
			t.Fatalf("poll %d: status %v, want %s", poll, d["status"], want)
		}

		if _, has := d["exitstatus"]; has != (want == "stopped") {
			t.Fatalf("poll %d: exitstatus present=%v with status %s", poll, has, want)
		}

		if d["user"] != "root@pam" || d["tokenid"] != "talchaos" || d["type"] != "qmstop" || d["id"] != "100" || d["upid"] != upid {
			t.Fatalf("poll %d: task fields %v", poll, d)
		}
	}

	if st := s.VM("pve", 100).State; st != proxmox.StateStopped {
		t.Fatalf("after the task the VM is %s", st)
	}

	tasks := s.Tasks()
	if len(tasks) != 1 || !tasks[0].Done || tasks[0].ExitStatus != "OK" || tasks[0].Polls != 3 {
		t.Fatalf("tasks %+v", tasks)
	}
}

func TestTaskDuration(t *testing.T) {
	s := newServer(t, proxmox.WithTaskPolls(0), proxmox.WithTaskDuration(100*time.Millisecond))
	auth := goodAuth(s)

	_, _, body := call(t, s, "POST", "/nodes/pve/qemu/100/status/suspend", auth, nil)
	upid, _ := body["data"].(string)
	start := time.Now()

	for {
		_, _, body = call(t, s, "GET", "/nodes/pve/tasks/"+upid+"/status", auth, nil)
		if d, _ := body["data"].(map[string]any); d["status"] == "stopped" {
			break
		}

		time.Sleep(10 * time.Millisecond)
	}

	if el := time.Since(start); el < 90*time.Millisecond {
		t.Fatalf("task stopped after %v, want about 100ms", el)
	}

	if st := s.VM("pve", 100); st.State != proxmox.StatePaused || st.Status != "running" || st.QMPStatus != "paused" {
		t.Fatalf("VM %+v, want paused (status running, qmpstatus paused)", st)
	}
}

func TestWorkerChecks(t *testing.T) {
	tests := []struct {
		name    string
		running bool
		lock    string
		fail    string
		action  string
		want    string
	}{
		{name: "start of a running VM", running: true, action: "start", want: "VM 100 already running"},
		{name: "stop of a locked VM", running: true, lock: "backup", action: "stop", want: "VM is locked (backup)"},
		{name: "stop of a stopped VM", running: false, action: "stop", want: "OK"},
		{name: "pause during backup", running: true, lock: "backup", action: "suspend", want: "OK"},
		{name: "forced failure", running: true, fail: "unexpected status", action: "reset", want: "unexpected status"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := proxmox.NewServer(proxmox.WithTaskPolls(0))
			defer s.Close()

			s.AddVM("pve", 100, tt.running)
			s.SetLock("pve", 100, tt.lock)

			if tt.fail != "" {
				s.FailNextTask(tt.fail)
			}

			auth := goodAuth(s)
			_, _, body := call(t, s, "POST", "/nodes/pve/qemu/100/status/"+tt.action, auth, nil)
			upid, _ := body["data"].(string)
			_, _, body = call(t, s, "GET", "/nodes/pve/tasks/"+upid+"/status", auth, nil)

			if d, _ := body["data"].(map[string]any); d["exitstatus"] != tt.want {
				t.Fatalf("exitstatus %v, want %q", d["exitstatus"], tt.want)
			}
		})
	}
}

func TestConfigTypesAndRequests(t *testing.T) {
	s := newServer(t)

	_, _, body := call(t, s, "GET", "/nodes/pve/qemu/100/config", goodAuth(s), nil)
	d, _ := body["data"].(map[string]any)

	if _, isNum := d["cores"].(float64); !isNum {
		t.Errorf("cores %#v, want a JSON number", d["cores"])
	}

	if _, isStr := d["memory"].(string); !isStr {
		t.Errorf("memory %#v, want a JSON string (PVE >= 8.1)", d["memory"])
	}

	if dg, _ := d["digest"].(string); !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(dg) {
		t.Errorf("digest %q", dg)
	}

	if d["net0"] != "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1" {
		t.Errorf("net0 %v", d["net0"])
	}

	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0] != "GET /api2/json/nodes/pve/qemu/100/config" {
		t.Fatalf("requests %q", reqs)
	}
}

// TestGoProxmoxSeesErrors checks that the client library surfaces the fake's
// errors the way it surfaces PVE's.
func TestGoProxmoxSeesErrors(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()

	c := pve.NewClient(s.URL(), pve.WithHTTPClient(s.Client()), pve.WithAPIToken(s.TokenID(), s.TokenSecret()))

	node, err := c.Node(ctx, "pve")
	if err != nil || node.PVEVersion == "" || node.CPUInfo.Cores != 16 {
		t.Fatalf("Node: %v %+v", err, node)
	}

	if _, err := node.VirtualMachine(ctx, 999); err == nil ||
		err.Error() != "500 Configuration file 'nodes/pve/qemu-server/999.conf' does not exist" {
		t.Fatalf("unknown VM: %v", err)
	}

	v, err := node.VirtualMachine(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}

	if !v.IsRunning() || v.VirtualMachineConfig.Nets["net0"] == "" || v.VirtualMachineConfig.Cores == nil {
		t.Fatalf("VM %+v config %+v", v, v.VirtualMachineConfig)
	}

	task, err := v.Stop(ctx)
	if err != nil || task.Type != "qmstop" || task.ID != "100" || task.Node != "pve" {
		t.Fatalf("Stop: %v %+v", err, task)
	}

	if err := task.Wait(ctx, 5*time.Millisecond, 5*time.Second); err != nil || !task.IsSuccessful {
		t.Fatalf("Wait: %v %+v", err, task)
	}

	bad := pve.NewClient(s.URL(), pve.WithHTTPClient(s.Client()), pve.WithAPIToken(s.TokenID(), "wrong"))
	if _, err := bad.Nodes(ctx); !errors.Is(err, pve.ErrNotAuthorized) {
		t.Fatalf("wrong token: %v", err)
	}
}

func TestAuthDelayAndClose(t *testing.T) {
	s := proxmox.NewServer(proxmox.WithAuthFailureDelay(time.Hour))

	done := make(chan struct{})

	go func() {
		defer close(done)

		req, _ := http.NewRequestWithContext(context.Background(), "GET", s.URL()+"/nodes/pve/status", nil)
		if res, err := s.Client().Do(req); err == nil {
			res.Body.Close()
		}
	}()

	time.Sleep(50 * time.Millisecond)

	closed := make(chan struct{})

	go func() { s.Close(); close(closed) }()

	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not cut the 401 delay short")
	}

	<-done
}

func TestTLS(t *testing.T) {
	s := newServer(t, proxmox.WithTLS())
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %s", s.URL())
	}

	if status, _, _ := call(t, s, "GET", "/nodes/pve/qemu/999/config", goodAuth(s), nil); !strings.HasPrefix(status, "500 Configuration file") {
		t.Fatalf("status over TLS %q", status)
	}
}

func TestConfigUpdates(t *testing.T) {
	s := newServer(t)
	auth := goodAuth(s)

	// PUT is the synchronous API: no task, applied on return.
	status, _, body := call(t, s, "PUT", "/nodes/pve/qemu/100/config", auth, url.Values{"name": {"cp-1"}})
	if status != "200 OK" || body["data"] != nil || s.VM("pve", 100).Config["name"] != "cp-1" {
		t.Fatalf("PUT: %s %v %v", status, body, s.VM("pve", 100).Config["name"])
	}

	// POST with background_delay answers null once the task is done.
	status, _, body = call(t, s, "POST", "/nodes/pve/qemu/100/config", auth, url.Values{"name": {"cp-2"}, "background_delay": {"5"}})
	if status != "200 OK" || body["data"] != nil || s.VM("pve", 100).Config["name"] != "cp-2" {
		t.Fatalf("POST background_delay: %s %v", status, body)
	}

	// delete removes keys.
	status, _, _ = call(t, s, "PUT", "/nodes/pve/qemu/100/config", auth, url.Values{"delete": {"agent"}})
	if _, has := s.VM("pve", 100).Config["agent"]; status != "200 OK" || has {
		t.Fatalf("delete: %s, agent still set: %v", status, has)
	}

	if n := len(s.Tasks()); n != 1 {
		t.Fatalf("%d tasks, want 1 (the POST)", n)
	}
}
