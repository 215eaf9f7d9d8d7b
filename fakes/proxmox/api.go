package proxmox

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// reply is what a handler answers: data on success, or an error status with
// PVE's message (and per-parameter errors for a 400).
type reply struct {
	code   int
	data   any
	msg    string
	errors map[string]string
	noBody bool // 401 from the auth handler: pveproxy sends no body
}

func ok(data any) reply { return reply{code: http.StatusOK, data: data} }

func fail(code int, format string, args ...any) reply {
	return reply{code: code, msg: fmt.Sprintf(format, args...) + "\n"}
}

// paramErr is PVE::Exception::raise_param_exc.
func paramErr(errs map[string]string) reply {
	return reply{code: http.StatusBadRequest, msg: "Parameter verification failed.\n", errors: errs}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	params, perr := readParams(r)

	rec := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Params: params}

	var rep reply

	switch {
	case perr != nil:
		rep = fail(http.StatusBadRequest, "%v", perr)
	case !strings.HasPrefix(r.URL.Path, BasePath+"/"):
		rep = fail(http.StatusNotImplemented, "no such uri")
	default:
		if msg := s.authenticate(r); msg != "" {
			rep = reply{code: http.StatusUnauthorized, msg: msg + "\n", noBody: true}
		} else {
			rep = s.route(r.Method, strings.TrimPrefix(r.URL.Path, BasePath), params)
		}
	}

	rec.Status = rep.code

	s.mu.Lock()
	s.requests = append(s.requests, rec)
	s.mu.Unlock()

	if rep.code == http.StatusUnauthorized && s.authDelay > 0 {
		t := time.NewTimer(s.authDelay)
		select {
		case <-t.C:
		case <-s.closing:
		case <-r.Context().Done():
		}
		t.Stop()
	}

	writeReply(w, r, rep)
}

// authenticate is pveproxy's token check (PVE::AccessControl::verify_token):
// it returns the 401 reason, or "" if the token is good.
func (s *Server) authenticate(r *http.Request) string {
	token := extractAPIToken(r.Header.Get("Authorization"))
	if token == "" {
		return "No ticket"
	}

	i := strings.LastIndexByte(token, '=')
	if i < 0 {
		return "no tokenid specified"
	}

	tokenID, value := token[:i], token[i+1:]

	user, name, found := strings.Cut(tokenID, "!")
	if !found || name == "" || !strings.Contains(user, "@") {
		return fmt.Sprintf("'%s' is not a valid token ID", tokenID)
	}

	wantUser, wantName, _ := strings.Cut(s.tokenID, "!")

	switch {
	case user != wantUser:
		return fmt.Sprintf("no such user ('%s')", user)
	case name != wantName:
		return fmt.Sprintf("no such token '%s' for user '%s'", name, user)
	case value != s.secret:
		return "invalid token value!"
	}

	return ""
}

// apiTokenRE is PVE::APIServer::Formatter::extract_auth_value for the
// PVEAPIToken key: what follows "PVEAPIToken=" (or "PVEAPIToken ") up to a ';'.
var apiTokenRE = regexp.MustCompile(`(?:^|\s)PVEAPIToken(?:=| )([^;]*)`)

func extractAPIToken(header string) string {
	m := apiTokenRE.FindStringSubmatch(header)
	if m == nil {
		return ""
	}

	if v, err := url.PathUnescape(m[1]); err == nil {
		return v // uri_unescape
	}

	return m[1]
}

// readParams merges the query string and the body (JSON object or
// application/x-www-form-urlencoded), as pveproxy's extract_params does.
func readParams(r *http.Request) (map[string]string, error) {
	params := map[string]string{}

	for k, v := range r.URL.Query() {
		params[k] = v[0]
	}

	if r.Body == nil {
		return params, nil
	}

	body, err := io.ReadAll(io.LimitReader(r.Body, 64*1024))
	if err != nil || len(strings.TrimSpace(string(body))) == 0 {
		return params, nil //nolint:nilerr // an unreadable body is an empty one here
	}

	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			return params, fmt.Errorf("unable to parse JSON body - %v", err)
		}

		for k, v := range m {
			params[k] = jsonParam(v)
		}

		return params, nil
	}

	form, err := url.ParseQuery(string(body))
	if err != nil {
		return params, fmt.Errorf("unable to parse form body - %v", err)
	}

	for k, v := range form {
		params[k] = v[0]
	}

	return params, nil
}

func jsonParam(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		if v {
			return "1"
		}

		return "0"
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)

		return string(b)
	}
}

var vmActions = map[string]bool{"start": true, "stop": true, "reset": true, "suspend": true, "resume": true}

// route dispatches on the path below /api2/json.
func (s *Server) route(method, path string, params map[string]string) reply {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	notImpl := fail(http.StatusNotImplemented, "Method '%s %s' not implemented", method, path)

	if len(seg) < 3 || seg[0] != "nodes" {
		return notImpl
	}

	node := seg[1]

	var h func() reply

	switch {
	case len(seg) == 3 && seg[2] == "status" && method == http.MethodGet:
		h = func() reply { return s.nodeStatus(node) }
	case len(seg) == 5 && seg[2] == "tasks" && seg[4] == "status" && method == http.MethodGet:
		h = func() reply { return s.taskStatus(node, seg[3]) }
	case len(seg) >= 5 && seg[2] == "qemu":
		// The vmid is checked by the node the request is proxied to, after
		// the node itself is resolved.
		qemu := func(f func(vmid int) reply) func() reply {
			return func() reply {
				vmid, rep := parseVMID(seg[3])
				if rep != nil {
					return *rep
				}

				return f(vmid)
			}
		}

		switch {
		case len(seg) == 6 && seg[4] == "status" && seg[5] == "current" && method == http.MethodGet:
			h = qemu(func(vmid int) reply { return s.vmStatus(node, vmid) })
		case len(seg) == 6 && seg[4] == "status" && vmActions[seg[5]] && method == http.MethodPost:
			h = qemu(func(vmid int) reply { return s.vmAction(node, vmid, seg[5], params) })
		case len(seg) == 5 && seg[4] == "config" && method == http.MethodGet:
			h = qemu(func(vmid int) reply { return s.vmConfig(node, vmid) })
		case len(seg) == 5 && seg[4] == "config" && (method == http.MethodPost || method == http.MethodPut):
			h = qemu(func(vmid int) reply { return s.vmUpdateConfig(node, vmid, method == http.MethodPost, params) })
		}
	}

	if h == nil {
		return notImpl
	}

	s.mu.Lock()
	known := s.nodes[node]
	s.mu.Unlock()

	if !known {
		// pveproxy proxies /nodes/{node}/... to that node and cannot resolve it
		// (PVE::Network::get_ip_from_hostname).
		return fail(http.StatusInternalServerError,
			"hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known", node, node)
	}

	return h()
}

// parseVMID checks the pve-vmid parameter.
func parseVMID(s string) (int, *reply) {
	n, err := strconv.Atoi(s)
	if err != nil {
		rep := paramErr(map[string]string{"vmid": fmt.Sprintf("type check ('integer') failed - got '%s'", s)})

		return 0, &rep
	}

	if n < 100 || n > 999999999 {
		rep := paramErr(map[string]string{"vmid": "invalid format - value does not look like a valid VM ID"})

		return 0, &rep
	}

	return n, nil
}

func (s *Server) nodeStatus(node string) reply {
	up := time.Since(s.boot)

	return ok(map[string]any{
		"uptime":     int64(up.Seconds()),
		"loadavg":    []string{"0.12", "0.09", "0.05"},
		"cpu":        0.0213,
		"wait":       0.0004,
		"idle":       0,
		"kversion":   "Linux 6.8.12-4-pve #1 SMP PREEMPT_DYNAMIC PMX 6.8.12-4 (2024-11-06T15:04Z) x86_64",
		"pveversion": "pve-manager/8.3.0/c1689ccb1065a83b",
		"cpuinfo": map[string]any{
			"user_hz": 100, "mhz": "2899.998", "model": "AMD EPYC 7313P 16-Core Processor",
			"cores": 16, "sockets": 1, "cpus": 32, "hvm": "1", "flags": "fpu vme de pse tsc msr pae mce",
		},
		"memory":         map[string]any{"used": 21474836480, "free": 46170898432, "total": 67645734912},
		"swap":           map[string]any{"used": 0, "free": 8589930496, "total": 8589930496},
		"rootfs":         map[string]any{"avail": 80003555328, "total": 100861726720, "free": 85143498752, "used": 15718227968},
		"ksm":            map[string]any{"shared": 0},
		"boot-info":      map[string]any{"mode": "efi", "secureboot": 0},
		"current-kernel": map[string]any{"sysname": "Linux", "release": "6.8.12-4-pve", "machine": "x86_64"},
	})
}

// noConfig is PVE::AbstractConfig::load_config's error for a missing VM.
func noConfig(node string, vmid int) reply {
	return fail(http.StatusInternalServerError, "Configuration file '%s' does not exist", configPath(node, vmid))
}

func (s *Server) vmStatus(node string, vmid int) reply {
	s.mu.Lock()
	defer s.mu.Unlock()

	v := s.vms[vmKey{node, vmid}]
	if v == nil {
		return noConfig(node, vmid)
	}

	mem, _ := strconv.Atoi(v.config["memory"])
	cores, _ := strconv.Atoi(v.config["cores"])
	sockets, _ := strconv.Atoi(v.config["sockets"])

	d := map[string]any{
		"vmid":      vmid,
		"name":      v.config["name"],
		"status":    v.status,
		"qmpstatus": v.qmpstatus,
		"cpus":      max(cores, 1) * max(sockets, 1),
		"maxmem":    mem * 1024 * 1024,
		"maxdisk":   34359738368,
		"disk":      0,
		"cpu":       0,
		"mem":       0,
		"netin":     0,
		"netout":    0,
		"diskread":  0,
		"diskwrite": 0,
		"uptime":    0,
		"ha":        map[string]any{"managed": 0},
	}

	if v.config["agent"] != "" && v.config["agent"] != "0" {
		d["agent"] = 1
	}

	if l := v.config["lock"]; l != "" {
		d["lock"] = l
	}

	if v.status == "running" {
		d["pid"] = v.pid
		d["uptime"] = int64(time.Since(v.started).Seconds())
		d["cpu"] = 0.0123
		d["mem"] = mem * 1024 * 1024 / 3
		d["running-machine"] = "pc-i440fx-9.0+pve0"
		d["running-qemu"] = "9.0.2"
		d["proxmox-support"] = map[string]any{"pbs-library-version": "1.4.1 (UNKNOWN)", "query-bitmap-info": true}
	}

	return ok(d)
}

// numericConfig are config keys PVE's JSON schema types as integer or boolean,
// which the API returns as JSON numbers (go-proxmox decodes some into *int).
var numericConfig = map[string]bool{
	"acpi": true, "autostart": true, "balloon": true, "cores": true, "cpuunits": true,
	"freeze": true, "kvm": true, "localtime": true, "numa": true, "onboot": true,
	"protection": true, "reboot": true, "shares": true, "sockets": true, "tablet": true,
	"template": true, "vcpus": true,
}

func (s *Server) vmConfig(node string, vmid int) reply {
	s.mu.Lock()
	defer s.mu.Unlock()

	v := s.vms[vmKey{node, vmid}]
	if v == nil {
		return noConfig(node, vmid)
	}

	d := map[string]any{"digest": v.digest()}

	for k, val := range v.config {
		if numericConfig[k] {
			if n, err := strconv.Atoi(val); err == nil {
				d[k] = n

				continue
			}
		}

		d[k] = val
	}

	return ok(d)
}

// actionParams are the optional parameters each power action takes.
var actionParams = map[string][]string{
	"start":   {"skiplock", "timeout", "machine", "force-cpu", "stateuri", "migratedfrom", "migration_type", "migration_network", "targetstorage"},
	"stop":    {"skiplock", "timeout", "keepActive", "migratedfrom", "overrule-shutdown"},
	"reset":   {"skiplock"},
	"suspend": {"skiplock", "todisk", "statestorage"},
	"resume":  {"skiplock", "nocheck"},
}

func (s *Server) vmAction(node string, vmid int, action string, params map[string]string) reply {
	if errs := unknownParams(params, actionParams[action]); errs != nil {
		return paramErr(errs)
	}

	if action == "suspend" && truthy(params["todisk"]) {
		return fail(http.StatusNotImplemented, "suspend to disk (todisk) is not implemented by the fake")
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	v := s.vms[vmKey{node, vmid}]
	if v == nil {
		return noConfig(node, vmid)
	}

	k := vmKey{node, vmid}
	running := v.status == "running"

	var (
		typ  string
		work func(v *vm) string
	)

	// The checks qemu-server's API2/Qemu.pm makes before fork_worker fail the
	// request; those inside the worker (PVE::QemuServer::vm_start, vm_stop,
	// vm_reset, RunState::vm_suspend/vm_resume) fail the task.
	switch action {
	case "start":
		typ = "qmstart"
		work = func(v *vm) string {
			if v.config["lock"] == "backup" && v.status == "running" {
				v.qmpstatus = "running" // start during backup resumes the guest

				return "OK"
			}

			if v.config["lock"] != "suspended" {
				if e := v.lockErr(); e != "" {
					return e
				}
			}

			if v.status == "running" {
				return fmt.Sprintf("VM %d already running", v.vmid)
			}

			v.setRunState(true)
			v.pid = s.allocPID()

			return "OK"
		}
	case "stop":
		typ = "qmstop"
		work = func(v *vm) string {
			if v.status != "running" {
				return "OK" // _do_vm_stop returns early when there is no process
			}

			if e := v.lockErr(); e != "" {
				return e
			}

			v.setRunState(false)

			return "OK"
		}
	case "reset":
		if !running {
			return fail(http.StatusInternalServerError, "VM %d not running", vmid)
		}

		typ = "qmreset"
		work = func(v *vm) string {
			if e := v.lockErr(); e != "" {
				return e
			}

			if v.status != "running" {
				return fmt.Sprintf("VM %d not running", v.vmid)
			}

			v.resets++
			v.started = time.Now()

			return "OK"
		}
	case "suspend":
		if !running {
			return fail(http.StatusInternalServerError, "VM %d not running", vmid)
		}

		typ = "qmpause"
		work = func(v *vm) string {
			if v.config["lock"] != "backup" {
				if e := v.lockErr(); e != "" {
					return e
				}
			}

			if v.status != "running" {
				return fmt.Sprintf("VM %d not running", v.vmid)
			}

			v.qmpstatus = "paused"

			return "OK"
		}
	case "resume":
		if !running {
			return fail(http.StatusInternalServerError, "VM %d not running", vmid)
		}

		typ = "qmresume"
		work = func(v *vm) string {
			if v.status != "running" {
				return fmt.Sprintf("VM %d not running", v.vmid)
			}

			if v.qmpstatus == "running" {
				return "OK" // nothing to resume
			}

			if v.config["lock"] != "backup" {
				if e := v.lockErr(); e != "" {
					return e
				}
			}

			v.qmpstatus = "running"

			return "OK"
		}
	}

	return ok(s.startTask(node, typ, strconv.Itoa(vmid), func() string {
		v := s.vms[k]
		if v == nil {
			return fmt.Sprintf("Configuration file '%s' does not exist", configPath(node, vmid))
		}

		return work(v)
	}))
}

// configMeta are the update_vm parameters that are not config keys.
var configMeta = []string{"digest", "delete", "revert", "skiplock", "force", "background_delay"}

// configKeys are the config keys the fake accepts in an update (PVE accepts
// many more; anything else is refused like an unknown one).
var configKeys = regexp.MustCompile(`^(net\d+|name|description|tags|onboot|memory|cores|sockets|boot|agent|protection)$`)

func (s *Server) vmUpdateConfig(node string, vmid int, async bool, params map[string]string) reply {
	errs := map[string]string{}

	for k, val := range params {
		switch {
		case isMeta(k):
		case configKeys.MatchString(k):
			if strings.HasPrefix(k, "net") {
				if e := checkNet(val); e != "" {
					errs[k] = e
				}
			}
		default:
			errs[k] = "property is not defined in schema and the schema does not allow additional properties"
		}
	}

	if len(errs) > 0 {
		return paramErr(errs)
	}

	if params["delete"] != "" {
		for _, d := range strings.Split(params["delete"], ",") {
			if _, set := params[d]; set {
				return paramErr(map[string]string{d: "conflicting values for 'delete' and setting a value"})
			}
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	k := vmKey{node, vmid}

	check := func(v *vm) string {
		if v == nil {
			return fmt.Sprintf("Configuration file '%s' does not exist", configPath(node, vmid))
		}

		if d := params["digest"]; d != "" && d != v.digest() {
			return "checksum mismatch (file change by other user?)"
		}

		if !truthy(params["skiplock"]) {
			return v.lockErr()
		}

		return ""
	}

	apply := func() string {
		v := s.vms[k]
		if e := check(v); e != "" {
			return e
		}

		for key, val := range params {
			if !isMeta(key) {
				v.config[key] = val
			}
		}

		if d := params["delete"]; d != "" {
			for _, key := range strings.Split(d, ",") {
				delete(v.config, strings.TrimSpace(key))
			}
		}

		return "OK"
	}

	// update_vm_api's $load_and_check_config->(0): early checks before forking.
	if e := check(s.vms[k]); e != "" {
		return fail(http.StatusInternalServerError, "%s", e)
	}

	if !async {
		if e := apply(); e != "" && e != "OK" {
			return fail(http.StatusInternalServerError, "%s", e)
		}

		return ok(nil)
	}

	upid := s.startTask(node, "qmconfig", strconv.Itoa(vmid), apply)

	if params["background_delay"] != "" {
		// PVE waits up to background_delay seconds and answers null if the
		// task is done by then; the fake's task is done at once.
		t := s.tasks[upid]
		t.finish()

		if t.exit != "OK" {
			return fail(http.StatusInternalServerError, "failed to update VM %d: %s", vmid, t.exit)
		}

		return ok(nil)
	}

	return ok(upid)
}

func isMeta(k string) bool { return slices.Contains(configMeta, k) }

func unknownParams(params map[string]string, allowed []string) map[string]string {
	var errs map[string]string

	for k := range params {
		if !slices.Contains(allowed, k) {
			if errs == nil {
				errs = map[string]string{}
			}

			errs[k] = "property is not defined in schema and the schema does not allow additional properties"
		}
	}

	return errs
}

// truthy is PVE's boolean parsing (1, yes, on, true).
func truthy(v string) bool {
	switch strings.ToLower(v) {
	case "1", "yes", "on", "true":
		return true
	}

	return false
}

var (
	netModels = map[string]bool{"e1000": true, "e1000e": true, "rtl8139": true, "virtio": true, "vmxnet3": true, "e1000-82540em": true, "e1000-82544gc": true, "e1000-82545em": true, "i82551": true, "i82557b": true, "i82559er": true, "ne2k_isa": true, "ne2k_pci": true, "pcnet": true}
	netKeys   = map[string]string{"bridge": "string", "firewall": "boolean", "link_down": "boolean", "macaddr": "string", "model": "string", "mtu": "integer", "queues": "integer", "rate": "number", "tag": "integer", "trunks": "string"}
	macRE     = regexp.MustCompile(`^(?i)[0-9a-f]{2}(:[0-9a-f]{2}){5}$`)
)

// checkNet validates a netX property string the way PVE's pve-qm-net format
// does in outline (model[=mac] first or model=..., known keys, booleans).
func checkNet(val string) string {
	for i, part := range strings.Split(val, ",") {
		key, v, hasVal := strings.Cut(part, "=")

		if netModels[key] {
			if i != 0 && key != "model" {
				return fmt.Sprintf("invalid format - format error\nmodel: duplicate key in comma-separated list property: %s", key)
			}

			if hasVal && !macRE.MatchString(v) {
				return fmt.Sprintf("invalid format - format error\nmacaddr: value does not look like a valid MAC address: %s", v)
			}

			continue
		}

		typ, known := netKeys[key]
		if !known || !hasVal {
			return fmt.Sprintf("invalid format - format error\n%s: property is not defined in schema and the schema does not allow additional properties", key)
		}

		switch typ {
		case "boolean":
			switch strings.ToLower(v) {
			case "0", "1", "yes", "no", "on", "off", "true", "false":
			default:
				return fmt.Sprintf("invalid format - format error\n%s: type check ('boolean') failed - got '%s'", key, v)
			}
		case "integer":
			if _, err := strconv.Atoi(v); err != nil {
				return fmt.Sprintf("invalid format - format error\n%s: type check ('integer') failed - got '%s'", key, v)
			}
		}
	}

	return ""
}
