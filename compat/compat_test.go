package compat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const (
	talosModule = "github.com/siderolabs/talos"
	talosctlPkg = talosModule + "/cmd/talosctl"
	timeScale   = "30"
	cmdTimeout  = 45 * time.Second // one talosctl invocation
	// one attempt of a polled talosctl command
	pollAttemptTimeout = 20 * time.Second
	stopDeadline       = 20 * time.Second // talchaos up must exit this soon after SIGINT
)

// inventory is the part of talchaos's inventory.yaml the suite reads.
type inventory struct {
	Talosconfig string `yaml:"talosconfig"`
	Nodes       []struct {
		Name    string `yaml:"name"`
		Role    string `yaml:"role"`
		Address string `yaml:"address"`
		Config  string `yaml:"config"`
	} `yaml:"nodes"`
}

// TestTalosctlAgainstUp starts `talchaos up` in maintenance mode and drives it
// with the real talosctl and Talos's own pre-boot checks, like a user would:
// the reads of a preflight in maintenance (get disks --insecure), apply-config,
// bootstrap, etcd members/status, service, get, logs, version, what the
// field's runbooks read (health with no node list, get members, dmesg -f),
// then Ctrl-C and a check that nothing is left behind.
func TestTalosctlAgainstUp(t *testing.T) {
	start := time.Now()

	goBin := goTool(t)

	compatDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}

	rootDir := filepath.Dir(compatDir)

	// The talos module is the one thing fetched from outside; without it there
	// is nothing to test against.
	talosVersion := goOut(t, goBin, compatDir, "list", "-m", "-f", "{{.Version}}", talosModule)
	if out, err := runGo(goBin, compatDir, "mod", "download", talosModule); err != nil {
		t.Skipf("the talos module %s@%s cannot be downloaded: %v\n%s", talosModule, talosVersion, err, out)
	}

	t.Logf("talos %s, talchaos from %s", talosVersion, rootDir)

	binDir := t.TempDir()
	talchaosBin := filepath.Join(binDir, "talchaos")
	precheckBin := filepath.Join(binDir, "precheck")

	// Build the three binaries in parallel: talosctl is minutes cold, seconds
	// from the cache.
	var (
		talosctlBin string
		wg          sync.WaitGroup
		buildErrs   = make([]error, 3)
	)

	wg.Add(3)

	go func() {
		defer wg.Done()

		t0 := time.Now()
		talosctlBin, buildErrs[0] = cachedTalosctl(goBin, compatDir, talosVersion)
		t.Logf("talosctl ready in %s", time.Since(t0).Round(time.Millisecond))
	}()

	go func() {
		defer wg.Done()

		t0 := time.Now()
		if out, err := runGo(goBin, rootDir, "build", "-o", talchaosBin, "./cmd/talchaos"); err != nil {
			buildErrs[1] = fmt.Errorf("build talchaos (%s/cmd/talchaos): %w\n%s", rootDir, err, out)
		}

		t.Logf("talchaos built in %s", time.Since(t0).Round(time.Millisecond))
	}()

	go func() {
		defer wg.Done()

		t0 := time.Now()
		if out, err := runGo(goBin, compatDir, "build", "-o", precheckBin, "./cmd/precheck"); err != nil {
			buildErrs[2] = fmt.Errorf("build precheck: %w\n%s", err, out)
		}

		t.Logf("precheck built in %s", time.Since(t0).Round(time.Millisecond))
	}()

	wg.Wait()

	if err := errors.Join(buildErrs...); err != nil {
		t.Fatal(err)
	}

	t.Logf("binaries ready after %s (talosctl: %s)", time.Since(start).Round(time.Millisecond), talosctlBin)

	// talchaos gets a private TMPDIR so that "no talchaos-sim-* dir left from
	// this run" does not depend on other runs on the machine.
	dir := filepath.Join(t.TempDir(), "cluster")
	simTmp := filepath.Join(t.TempDir(), "tmp")

	if err := os.MkdirAll(simTmp, 0o700); err != nil {
		t.Fatal(err)
	}

	sysTmpBefore := simDirs(os.TempDir())

	up := startUp(t, talchaosBin, dir, simTmp)

	inv := readInventory(t, filepath.Join(dir, "inventory.yaml"))
	talosconfig := filepath.Join(dir, "talosconfig")

	var cps, all []string

	for _, n := range inv.Nodes {
		all = append(all, n.Address)

		if n.Role == "controlplane" {
			cps = append(cps, n.Address)
		}
	}

	if len(cps) != 3 {
		t.Fatalf("inventory lists %d control planes, want 3: %+v", len(cps), inv.Nodes)
	}

	// If talchaos honours TMPDIR its sim dir is in simTmp and only that is
	// checked at the end; otherwise new dirs in the system temp dir count
	// (another run on the machine could then add noise).
	privateTmp := len(simDirs(simTmp)) > 0
	if !privateTmp {
		t.Logf("note: no talchaos-sim-* dir in the private TMPDIR %s while running; checking %s instead", simTmp, os.TempDir())
	}

	res := &results{t: t}
	defer res.summary()

	tc := &talosctl{t: t, bin: talosctlBin, talosconfig: talosconfig}

	// 0. What FR-003's preflight reads from a node in maintenance.
	readOnlyInMaintenance(tc, res, cps[0])

	// 1. apply-config --insecure to every node in maintenance mode.
	for _, n := range inv.Nodes {
		out, err := tc.run("apply-config", "--insecure", "-n", n.Address, "-f", filepath.Join(dir, n.Config))
		res.check(err == nil, "apply-config --insecure -n %s (%s)", n.Address, n.Name).detail(err, out)
	}

	// 2. The nodes leave maintenance: version through the talosconfig works.
	for _, ip := range all {
		out, err := tc.poll(60*time.Second, func(out string, err error) bool { return err == nil }, "-n", ip, "version")
		res.check(err == nil && strings.Contains(out, "Server:") && containsNode(out, ip),
			"-n %s version after apply (left maintenance)", ip).detail(err, out)
	}

	// 3. bootstrap once (default node cp1 from the talosconfig), then again.
	//    Right after leaving maintenance real Talos may still answer
	//    FailedPrecondition (not available / time not in sync); retry only those.
	out, err := tc.poll(60*time.Second, func(out string, err error) bool {
		return err == nil || !(strings.Contains(out, "bootstrap is not available yet") || strings.Contains(out, "time is not in sync yet"))
	}, "bootstrap")
	res.check(err == nil, "bootstrap (default node cp1)").detail(err, out)

	// The second bootstrap comes once cp1's etcd is up, as a retried script's
	// would. (Sooner, both real Talos and talchaos pass the data-dir check while
	// the new etcd has not written it yet, stop that etcd, and answer Unknown:
	// services.BootstrapEtcd re-checks the dir after stopping etcd.)
	out, err = tc.poll(2*time.Minute, etcdUp, "-n", cps[0], "service", "etcd")
	res.check(etcdUp(out, err), "-n %s service etcd: Running and healthy after bootstrap", cps[0]).detail(err, out)

	out, err = tc.run("bootstrap")
	res.check(err != nil && strings.Contains(out, "code = AlreadyExists desc = etcd data directory is not empty"),
		"second bootstrap fails with AlreadyExists \"etcd data directory is not empty\"").detail(err, out)

	// 4. etcd members: eventually 3 voters.
	out, err = tc.poll(3*time.Minute, func(out string, err error) bool {
		members, learners := parseMembers(out)

		return err == nil && members == 3 && learners == 0
	}, "etcd", "members")
	members, learners := parseMembers(out)
	res.check(err == nil && members == 3 && learners == 0, "etcd members lists 3 members, none learner (got %d, %d learners)", members, learners).detail(err, out)

	// 5. One endpoint, many nodes.
	out, err = tc.run("version", "-n", strings.Join(cps, ","))
	ok := err == nil && strings.Count(out, "NODE:") == len(cps) && strings.Count(out, "Tag:") == len(cps)+1 // + the client's

	for _, ip := range cps {
		ok = ok && containsNode(out, ip)
	}

	res.check(ok, "version -n %s (one endpoint, many nodes)", strings.Join(cps, ",")).detail(err, out)

	// 6. Per-node reads, one node at a time with -n.
	for i, ip := range cps {
		out, err := tc.run("-n", ip, "etcd", "status")
		res.check(err == nil && match(out, `(?m)^NODE\s+MEMBER\s+DB SIZE\s+IN USE\s+LEADER`) &&
			match(out, `(?m)^`+regexp.QuoteMeta(ip)+`\s+[0-9a-f]{16}\s.*\s[0-9a-f]{16}\s.*\sfalse\s+3\.\d+\.\d+`),
			"-n %s etcd status (a voter with a leader)", ip).detail(err, out)

		out, err = tc.poll(2*time.Minute, etcdUp, "-n", ip, "service", "etcd")
		res.check(etcdUp(out, err) && match(out, `(?m)^NODE\s+`+regexp.QuoteMeta(ip)+`\s*$`) && match(out, `(?m)^ID\s+etcd\s*$`) &&
			strings.Contains(out, "Started task etcd"),
			"-n %s service etcd (Running, OK)", ip).detail(err, out)

		running := func(out string, err error) bool { return err == nil && match(out, `(?m)^\s*stage: running\s*$`) }
		out, err = tc.poll(2*time.Minute, running, "-n", ip, "get", "machinestatus", "-o", "yaml")
		res.check(running(out, err) && match(out, `(?m)^node: `+regexp.QuoteMeta(ip)+`\s*$`) && strings.Contains(out, "type: MachineStatuses.runtime.talos.dev") &&
			match(out, `(?m)^\s*ready: true\s*$`),
			"-n %s get machinestatus -o yaml (stage running, ready)", ip).detail(err, out)

		out, err = tc.run("-n", ip, "get", "machinestatus")
		res.check(err == nil && match(out, `(?m)^NODE\s+NAMESPACE\s+TYPE\s+ID\s+VERSION\s+STAGE\s+READY`) &&
			match(out, `(?m)^`+regexp.QuoteMeta(ip)+`\s+runtime\s+MachineStatus\s+machine\s+\d+\s+running\s+true\s*$`),
			"-n %s get machinestatus (table)", ip).detail(err, out)

		// machined's log: real Talos strings. Every line is prefixed with the
		// node that was asked for (apid sets metadata.hostname to the target).
		// The bootstrap node waits to join only when the bootstrap comes
		// after its etcd's pre stage: one that comes during it (the image
		// pull) stops the service ("Bootstrap requested") before any join.
		want := []string{"etcd is waiting to join the cluster", "service[etcd](Running): Started task etcd"}
		if i == 0 {
			want = []string{"bootstrap request received", "service[etcd](Running): Started task etcd"}
		}

		out, err = tc.run("-n", ip, "logs", "machined")
		ok := err == nil

		for _, w := range want {
			ok = ok && strings.Contains(out, w)
		}

		res.check(ok, "-n %s logs machined (contains %q)", ip, want).detail(err, out)

		// Through the node's own endpoint and through another control plane's.
		other := cps[(i+1)%len(cps)]

		for _, ep := range []string{ip, other} {
			out, err = tc.run("-e", ep, "-n", ip, "logs", "machined", "--tail", "5")
			res.check(err == nil && allLinesPrefixed(out, ip+": "),
				"-e %s -n %s logs machined: every line prefixed %q", ep, ip, ip+": ").detail(err, out)
		}
	}

	// 7. Talos's own pre-boot checks through one endpoint, -n per node.
	pc := exec.Command(precheckBin, "--talosconfig", talosconfig, "--control-planes", strings.Join(cps, ","), "--timeout", "4m")
	pcOut, err := pc.CombinedOutput()
	t.Logf("$ precheck --control-planes %s\n%s", strings.Join(cps, ","), pcOut)
	res.check(err == nil && bytes.Contains(pcOut, []byte("PASS")), "precheck: PreBootSequenceChecks through endpoint %s", cps[0]).detail(err, string(pcOut))

	// 7b. The read-only surface the field's runbooks use (FR-001): health
	//     with no node list (its nodes from the discovered members), get
	//     members, dmesg (-f) and friends.
	readOnlyConfigured(tc, res, inv, false)

	// 8. What a configured node answers a script poking at it, as a real one
	//    does (issue Step 7, gaps 3 and 4).
	//
	// An insecure apply to a configured node: the TLS alert "certificate
	// required" every time, through the node's proxy too (field report FR-004).
	byAddress := map[string]int{}
	for i, n := range inv.Nodes {
		byAddress[n.Address] = i
	}

	second, last := inv.Nodes[byAddress[cps[1]]], inv.Nodes[byAddress[cps[len(cps)-1]]]
	alerts := 0

	for range 20 {
		out, err := tc.run("apply-config", "--insecure", "-n", cps[1], "-f", filepath.Join(dir, second.Config))
		if err != nil && strings.Contains(out, "tls: certificate required") {
			alerts++
		} else {
			t.Logf("apply-config --insecure to a configured node: %v\n%s", err, out)
		}
	}

	res.check(alerts == 20, "apply-config --insecure -n %s (configured): tls: certificate required %d of 20 times", cps[1], alerts).detail(nil, "")

	// etcd alarm list: no alarm on a healthy cluster (EtcdAlarmList).
	out, err = tc.run("-n", cps[0], "etcd", "alarm", "list")
	res.check(err == nil && !strings.Contains(out, "NOSPACE") && !strings.Contains(out, "CORRUPT"),
		"-n %s etcd alarm list (no alarm)", cps[0]).detail(err, out)

	// kubeconfig: the admin kubeconfig of the config's cluster, from a
	// control plane (Kubeconfig: a tar.gz of one file, merged by talosctl).
	kubeconfig := filepath.Join(dir, "kubeconfig")
	out, err = tc.run("-n", cps[0], "kubeconfig", kubeconfig, "--force")
	kc, rerr := os.ReadFile(kubeconfig)
	res.check(err == nil && rerr == nil && strings.Contains(string(kc), "current-context: admin@") && strings.Contains(string(kc), "client-certificate-data:"),
		"-n %s kubeconfig: an admin kubeconfig", cps[0]).detail(err, out)

	// service etcd restart: etcd does not allow it (system.go APIRestart).
	out, err = tc.run("-n", cps[0], "service", "etcd", "restart")
	res.check(err != nil && strings.Contains(out, `service "etcd" doesn't support restart operation via API`),
		"-n %s service etcd restart refused: etcd doesn't support restart via API", cps[0]).detail(err, out)

	// etcd forfeit-leadership on every control plane: one of them was the
	// leader and hands over; the cluster keeps three voters.
	for _, ip := range cps {
		out, err = tc.run("-n", ip, "etcd", "forfeit-leadership")
		res.check(err == nil, "-n %s etcd forfeit-leadership", ip).detail(err, out)
	}

	// etcd leave on the last control plane: it leaves the member list, its
	// etcd is stopped (SIGTERM, then Finished) and stays stopped.
	out, err = tc.run("-n", last.Address, "etcd", "leave")
	res.check(err == nil, "-n %s etcd leave", last.Address).detail(err, out)

	out, err = tc.poll(time.Minute, func(out string, err error) bool {
		members, _ := parseMembers(out)

		return err == nil && members == len(cps)-1
	}, "-n", cps[0], "etcd", "members")
	members, _ = parseMembers(out)
	res.check(err == nil && members == len(cps)-1 && !strings.Contains(out, " "+last.Name+" "),
		"etcd members after %s left: %d members, without it", last.Name, members).detail(err, out)

	out, err = tc.run("-n", last.Address, "service", "etcd")
	res.check(err == nil && match(out, `(?m)^STATE\s+Finished\s*$`) && strings.Contains(out, "Sending SIGTERM to task etcd"),
		"-n %s service etcd after leaving: Finished, stopped with SIGTERM", last.Address).detail(err, out)

	// 9. Ctrl-C: talchaos exits in time and leaves nothing behind.
	stopStart := time.Now()
	exitErr, exited := up.interrupt(stopDeadline)
	res.check(exited, "talchaos up exits within %s of SIGINT (took %s, %v)", stopDeadline, time.Since(stopStart).Round(time.Millisecond), exitErr).
		detail(exitErr, up.out.String())

	if exited {
		res.check(exitErr == nil, "talchaos up exits 0 after SIGINT").detail(exitErr, up.out.String())
	}

	for _, n := range inv.Nodes {
		ports := []string{"50000"}
		if n.Role == "controlplane" {
			ports = append(ports, "2379", "2380")
		}

		for _, port := range ports {
			addr := net.JoinHostPort(n.Address, port)
			l, err := net.Listen("tcp", addr)
			res.check(err == nil, "no listener left on %s", addr).detail(err, "")

			if l != nil {
				l.Close() //nolint:errcheck
			}
		}
	}

	left := simDirs(simTmp)

	if !privateTmp {
		for _, d := range simDirs(os.TempDir()) {
			if !slices.Contains(sysTmpBefore, d) {
				left = append(left, d)
			}
		}
	}

	res.check(len(left) == 0, "no talchaos-sim-* temp dir left (%v)", left).detail(nil, "")

	t.Logf("total %s", time.Since(start).Round(time.Millisecond))
}

// --- the read-only surface (issue 26, item 8) ---

// readOnlyInMaintenance is what a node in maintenance answers the field's
// preflight reads, as Talos v1.12.6's maintenance service does: its disks,
// no members (discovery needs the config), the machine config refused to
// the reader every insecure client is.
func readOnlyInMaintenance(tc *talosctl, res *results, ip string) {
	out, err := tc.run("get", "disks", "--insecure", "-n", ip)
	res.check(err == nil && match(out, `(?m)^NODE\s+NAMESPACE\s+TYPE\s+ID\s+VERSION\s+SIZE\s+READ ONLY\s+TRANSPORT\s+ROTATIONAL\s+WWID\s+MODEL\s+SERIAL\s*$`) &&
		match(out, `(?m)^\s+runtime\s+Disk\s+sda\s+\d+\s+34 GB\s+false\s+virtio\s+true\s+QEMU HARDDISK\s*$`),
		"get disks --insecure -n %s (maintenance): sda", ip).detail(err, out)

	out, err = tc.run("get", "members", "--insecure", "-n", ip)
	res.check(err == nil && strings.TrimSpace(out) == "NODE   NAMESPACE   TYPE   ID   VERSION   HOSTNAME   MACHINE TYPE   OS   ADDRESSES",
		"get members --insecure -n %s (maintenance): none", ip).detail(err, out)

	out, err = tc.run("get", "machineconfig", "--insecure", "-n", ip)
	res.check(err != nil && strings.Contains(out, "rpc error: code = PermissionDenied desc = not authorized"),
		"get machineconfig --insecure -n %s (maintenance): PermissionDenied not authorized", ip).detail(err, out)

	out, err = tc.run("get", "members", "--insecure", "-n", ip, "cp1")
	res.check(err != nil && strings.Contains(out, "rpc error: code = NotFound desc = resource Members.cluster.talos.dev(cluster/cp1@undefined) doesn't exist"),
		"get members --insecure -n %s cp1 (maintenance): NotFound", ip).detail(err, out)
}

// talosChecks are the names of Talos's pre-boot checks (pkg/cluster/check
// PreBootSequenceChecks), in the order talosctl health runs them.
var talosChecks = []string{
	"etcd to be healthy", "etcd members to be consistent across nodes", "etcd members to be control plane nodes",
	"apid to be ready", "all nodes memory sizes", "all nodes disk sizes", "no diagnostics", "kubelet to be healthy",
	"all nodes to finish boot sequence",
}

// checksOK reports whether talosctl health's output has each check OK.
func checksOK(out string, checks ...string) bool {
	for _, c := range checks {
		if !strings.Contains(out, "waiting for "+c+": OK") {
			return false
		}
	}

	return true
}

// readOnlyConfigured is what a formed cluster answers the field's runbooks
// (FR-001: `talosctl -n IP health`, `talosctl -n IP dmesg -f`) and the reads
// around them. Without Kubernetes, health passes Talos's checks and stops
// at the first Kubernetes one; with it, it passes.
func readOnlyConfigured(tc *talosctl, res *results, inv *inventory, kubernetes bool) {
	var cp, name string

	for _, n := range inv.Nodes {
		if n.Role == "controlplane" && cp == "" {
			cp, name = n.Address, n.Name
		}
	}

	// get members: every node, as the discovery service lists it.
	out, err := tc.poll(time.Minute, func(out string, err error) bool {
		return err == nil && strings.Count(out, " Member ") == len(inv.Nodes)
	}, "-n", cp, "get", "members")
	ok := err == nil && match(out, `(?m)^NODE\s+NAMESPACE\s+TYPE\s+ID\s+VERSION\s+HOSTNAME\s+MACHINE TYPE\s+OS\s+ADDRESSES\s*$`)

	for _, n := range inv.Nodes {
		ok = ok && match(out, `(?m)^`+regexp.QuoteMeta(cp)+`\s+cluster\s+Member\s+`+n.Name+`\s+\d+\s+`+n.Name+`\s+`+n.Role+
			`\s+Talos \(v1\.12\.6\)\s+\["`+regexp.QuoteMeta(n.Address)+`"\]\s*$`)
	}

	res.check(ok, "-n %s get members: every node, its hostname, type, OS and address", cp).detail(err, out)

	// health with no node list: the nodes come from the members.
	timeout := "60s"
	if kubernetes {
		timeout = "5m"
	}

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	o, err := exec.CommandContext(ctx, tc.bin, "--talosconfig", tc.talosconfig, "-n", cp, "health", "--server=false", "--wait-timeout", timeout).CombinedOutput()
	out = string(o)
	tc.t.Logf("$ talosctl -n %s health --server=false --wait-timeout %s\n%s", cp, timeout, out)

	if kubernetes {
		res.check(err == nil && checksOK(out, talosChecks...) && checksOK(out, "all k8s nodes to report", "all control plane static pods to be running",
			"all control plane components to be ready", "all k8s nodes to report ready", "all k8s nodes to report schedulable"),
			"-n %s health --server=false (no node list): every check OK", cp).detail(err, out)
	} else {
		res.check(checksOK(out, talosChecks...) && strings.Contains(out, "waiting for all k8s nodes to report: "),
			"-n %s health --server=false (no node list): Talos's checks OK, then Kubernetes (not running)", cp).detail(err, out)
	}

	// dmesg: machined's log as kernel records.
	record := `(?m)^` + regexp.QuoteMeta(cp) + `: user: warning: \[\d{4}-\d\d-\d\dT[\d:.]+Z\]: \[talos\] `
	out, err = tc.run("-n", cp, "dmesg")
	res.check(err == nil && match(out, record+`service\[etcd\]\(Running\): Started task etcd`) && allLinesPrefixed(out, cp+": user: warning: ["),
		"-n %s dmesg: machined's [talos] lines as user.warning kernel records", cp).detail(err, out)

	// dmesg -f: what machined logs from now on too (a bootstrap retried).
	out, err = tc.follow(30*time.Second, "bootstrap request received", func() {
		tc.run("-n", cp, "bootstrap") //nolint:errcheck // AlreadyExists: only its log line matters
	}, "-n", cp, "dmesg", "-f")
	res.check(err == nil && match(out, record+`bootstrap request received`),
		"-n %s dmesg -f: follows (a new bootstrap request's line arrives)", cp).detail(err, out)

	for _, read := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "hostname"}, `\s+network\s+HostnameStatus\s+hostname\s+\d+\s+` + name + `\s*$`},
		{[]string{"get", "nodename"}, `\s+k8s\s+Nodename\s+nodename\s+\d+\s+` + name + `\s*$`},
		{[]string{"get", "addresses"}, `\s+network\s+AddressStatus\s+eth0/` + regexp.QuoteMeta(cp) + `/24\s+\d+\s+` + regexp.QuoteMeta(cp) + `/24\s+eth0\s*$`},
		{[]string{"get", "machineconfig"}, `\s+config\s+MachineConfig\s+v1alpha1\s+\d+\s*$`},
		{[]string{"get", "systemdisk"}, `\s+runtime\s+SystemDisk\s+system-disk\s+\d+\s+sda\s*$`},
		{[]string{"get", "timestatus"}, `\s+runtime\s+TimeStatus\s+node\s+\d+\s+true\s*$`},
		{[]string{"time"}, `\s+time\.cloudflare\.com\s+\d{4}-.*UTC\s+\d{4}-.*UTC\s*$`},
	} {
		out, err := tc.run(append([]string{"-n", cp}, read.args...)...)
		res.check(err == nil && match(out, `(?m)^`+regexp.QuoteMeta(cp)+read.want), "-n %s %s", cp, strings.Join(read.args, " ")).detail(err, out)
	}

	// get staticpods: the control plane's components, with Kubernetes.
	out, err = tc.run("-n", cp, "get", "staticpods")
	pods := 0

	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if match(out, `(?m)^`+regexp.QuoteMeta(cp)+`\s+k8s\s+StaticPod\s+`+c+`\s+\d+\s*$`) {
			pods++
		}
	}

	if kubernetes {
		res.check(err == nil && pods == 3, "-n %s get staticpods: the three control-plane components", cp).detail(err, out)
	} else {
		res.check(err == nil && pods == 0 && strings.TrimSpace(out) == "NODE   NAMESPACE   TYPE   ID   VERSION",
			"-n %s get staticpods: none without Kubernetes", cp).detail(err, out)
	}
}

// --- the talchaos up process ---

type upProcess struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

func startUp(t *testing.T, bin, dir, tmp string, extra ...string) *upProcess {
	t.Helper()

	args := []string{"up", "--dir", dir}
	if !slices.Contains(extra, "--from") { // a scenario brings its own
		args = append(args, "--time-scale", timeScale)
	}

	args = append(args, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	// Its own process group: a Ctrl-C in the terminal running the test must not
	// reach it before the test does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	p := &upProcess{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout = p.out
	cmd.Stderr = p.out

	t.Logf("$ talchaos %s", strings.Join(args, " "))

	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()

	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			t.Logf("talchaos up still running at the end of the test: stopping it")

			if _, exited := p.interrupt(stopDeadline); !exited {
				cmd.Process.Kill() //nolint:errcheck
				<-p.done
			}
		}

		t.Logf("talchaos up output:\n%s", p.out.String())
	})

	deadline := time.Now().Add(90 * time.Second)

	for {
		select {
		case <-p.done:
			t.Fatalf("talchaos up exited early: %v\n%s", p.err, p.out.String())
		case <-time.After(100 * time.Millisecond):
		}

		if _, err := os.Stat(filepath.Join(dir, "inventory.yaml")); err == nil && strings.Contains(p.out.String(), "running; press Ctrl-C") {
			t.Logf("talchaos up ready:\n%s", p.out.String())

			return p
		}

		if time.Now().After(deadline) {
			t.Fatalf("talchaos up not ready after 90s:\n%s", p.out.String())
		}
	}
}

// interrupt sends SIGINT and waits up to d for the process to exit.
func (p *upProcess) interrupt(d time.Duration) (error, bool) {
	select {
	case <-p.done:
		return p.err, true
	default:
	}

	if err := p.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err, false
	}

	select {
	case <-p.done:
		return p.err, true
	case <-time.After(d):
		return nil, false
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()

	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()

	return b.buf.String()
}

func readInventory(t *testing.T, path string) *inventory {
	t.Helper()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	var inv inventory
	if err := yaml.Unmarshal(data, &inv); err != nil {
		t.Fatalf("parse %s: %v\n%s", path, err, data)
	}

	if len(inv.Nodes) == 0 {
		t.Fatalf("no nodes in %s:\n%s", path, data)
	}

	for _, n := range inv.Nodes {
		if net.ParseIP(n.Address) == nil || n.Config == "" {
			t.Fatalf("bad node in %s: %+v", path, n)
		}
	}

	return &inv
}

func simDirs(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "talchaos-sim-*")) //nolint:errcheck

	return m
}

// --- talosctl ---

type talosctl struct {
	t           *testing.T
	bin         string
	talosconfig string
}

// run runs talosctl --talosconfig D/talosconfig ARGS and returns its combined output.
func (c *talosctl) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()

	full := append([]string{"--talosconfig", c.talosconfig}, args...)
	cmd := exec.CommandContext(ctx, c.bin, full...)

	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s: %w", cmdTimeout, err)
	}

	c.t.Logf("$ talosctl %s\n%s%s", strings.Join(args, " "), out, errLine(err))

	return string(out), err
}

// poll repeats a talosctl command until done says so or d passes, and returns
// the last result. Only the first and last attempts are logged.
func (c *talosctl) poll(d time.Duration, done func(string, error) bool, args ...string) (string, error) {
	deadline := time.Now().Add(d)
	attempts := 0

	for {
		attempts++

		ctx, cancel := context.WithTimeout(context.Background(), pollAttemptTimeout)
		full := append([]string{"--talosconfig", c.talosconfig}, args...)
		out, err := exec.CommandContext(ctx, c.bin, full...).CombinedOutput()
		cancel()

		if done(string(out), err) || time.Now().After(deadline) {
			c.t.Logf("$ talosctl %s   (attempt %d)\n%s%s", strings.Join(args, " "), attempts, out, errLine(err))

			return string(out), err
		}

		if attempts == 1 {
			c.t.Logf("$ talosctl %s   (attempt 1, polling)\n%s%s", strings.Join(args, " "), out, errLine(err))
		}

		time.Sleep(500 * time.Millisecond)
	}
}

// follow runs a talosctl command that streams (-f) until a line containing
// want arrives after act ran, or d passes; it returns what it printed, and
// an error when want never came.
func (c *talosctl) follow(d time.Duration, want string, act func(), args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()

	cmd := exec.CommandContext(ctx, c.bin, append([]string{"--talosconfig", c.talosconfig}, args...)...)

	var out syncBuffer

	cmd.Stdout, cmd.Stderr = &out, &out

	if err := cmd.Start(); err != nil {
		return "", err
	}

	defer func() {
		cancel()
		cmd.Wait() //nolint:errcheck // killed by the context
		c.t.Logf("$ talosctl %s   (followed)\n%s", strings.Join(args, " "), out.String())
	}()

	// What the command printed before act must not count.
	time.Sleep(2 * time.Second)

	before := out.String()

	act()

	for ctx.Err() == nil {
		if strings.Contains(strings.TrimPrefix(out.String(), before), want) {
			return out.String(), nil
		}

		time.Sleep(200 * time.Millisecond)
	}

	return out.String(), fmt.Errorf("no %q within %s", want, d)
}

func errLine(err error) string {
	if err == nil {
		return ""
	}

	return "(" + err.Error() + ")\n"
}

// containsNode reports whether talosctl output names the node, as the NODE
// column/field of one-to-many replies.
func containsNode(out, ip string) bool {
	return match(out, `(?m)^\s*NODE:?\s+`+regexp.QuoteMeta(ip)+`\s*$`)
}

// etcdUp is a poll condition for `talosctl service etcd`.
func etcdUp(out string, err error) bool {
	return err == nil && match(out, `(?m)^STATE\s+Running\s*$`) && match(out, `(?m)^HEALTH\s+OK\s*$`)
}

// allLinesPrefixed reports whether out has lines and each starts with prefix
// (talosctl's warnings on stderr aside).
func allLinesPrefixed(out, prefix string) bool {
	n := 0

	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if line == "" || strings.HasPrefix(line, "WARNING: ") {
			continue
		}

		if !strings.HasPrefix(line, prefix) {
			return false
		}

		n++
	}

	return n > 0
}

func match(s, re string) bool { return regexp.MustCompile(re).MatchString(s) }

// parseMembers counts the rows of `talosctl etcd members` and the learners among them.
func parseMembers(out string) (members, learners int) {
	inTable := false

	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}

		if f[len(f)-1] == "LEARNER" {
			inTable = true

			continue
		}

		if !inTable {
			continue
		}

		switch f[len(f)-1] {
		case "false":
			members++
		case "true":
			members++
			learners++
		}
	}

	return members, learners
}

// --- results ---

type results struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
}

type result struct {
	r    *results
	ok   bool
	name string
}

func (r *results) check(ok bool, format string, args ...any) *result {
	name := fmt.Sprintf(format, args...)

	r.mu.Lock()
	defer r.mu.Unlock()

	status := "PASS"
	if !ok {
		status = "FAIL"
	}

	r.lines = append(r.lines, status+"  "+name)

	return &result{r: r, ok: ok, name: name}
}

// detail fails the test with the command's error and output when the check failed.
func (res *result) detail(err error, out string) {
	if res.ok {
		return
	}

	res.r.t.Errorf("FAIL %s\nerror: %v\noutput:\n%s", res.name, err, out)
}

func (r *results) summary() {
	r.mu.Lock()
	defer r.mu.Unlock()

	r.t.Logf("summary:\n%s", strings.Join(r.lines, "\n"))
}

// --- go tool helpers ---

func goTool(t *testing.T) string {
	t.Helper()

	if g := os.Getenv("GO"); g != "" {
		if p, err := exec.LookPath(g); err == nil {
			return p
		}
	}

	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool not found: %v", err)
	}

	return p
}

func runGo(goBin, dir string, args ...string) (string, error) {
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	// Never let a workspace file above pull the two modules together.
	cmd.Env = append(os.Environ(), "GOWORK=off")

	out, err := cmd.CombinedOutput()

	return string(out), err
}

func goOut(t *testing.T, goBin, dir string, args ...string) string {
	t.Helper()

	out, err := runGo(goBin, dir, args...)
	if err != nil {
		if isDownloadError(out) {
			t.Skipf("the talos module cannot be downloaded: go %s: %v\n%s", strings.Join(args, " "), err, out)
		}

		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}

	return strings.TrimSpace(out)
}

func isDownloadError(out string) bool {
	for _, s := range []string{"403 Forbidden", "404 Not Found", "dial tcp", "no such host", "i/o timeout", "reading https://", "GOPROXY", "GOFLAGS=-mod=mod"} {
		if strings.Contains(out, s) {
			return true
		}
	}

	return false
}

// cacheDir is $XDG_CACHE_HOME/talchaos or ~/.cache/talchaos.
func cacheDir() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}

		base = filepath.Join(home, ".cache")
	}

	dir := filepath.Join(base, "talchaos")

	return dir, os.MkdirAll(dir, 0o755)
}

// cachedTalosctl returns <cache>/talosctl-<version>, building it from the
// talos module pinned in this module's go.mod when it is not there yet.
func cachedTalosctl(goBin, compatDir, version string) (string, error) {
	dir, err := cacheDir()
	if err != nil {
		return "", fmt.Errorf("cache dir: %w", err)
	}

	bin := filepath.Join(dir, "talosctl-"+version)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return bin, nil
	}

	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	defer os.Remove(tmp) //nolint:errcheck

	if out, err := runGo(goBin, compatDir, "build", "-trimpath", "-o", tmp, talosctlPkg); err != nil {
		return "", fmt.Errorf("build talosctl %s: %w\n%s", version, err, out)
	}

	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}

	return bin, nil
}

// upBinaries builds talchaos and the real talosctl (cached) for a test
// against `talchaos up`; without the talos module there is nothing to test.
func upBinaries(t *testing.T) (talchaosBin, talosctlBin string) {
	t.Helper()

	goBin := goTool(t)

	compatDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}

	talosVersion := goOut(t, goBin, compatDir, "list", "-m", "-f", "{{.Version}}", talosModule)
	if out, err := runGo(goBin, compatDir, "mod", "download", talosModule); err != nil {
		t.Skipf("the talos module %s@%s cannot be downloaded: %v\n%s", talosModule, talosVersion, err, out)
	}

	talchaosBin = filepath.Join(t.TempDir(), "talchaos")
	if out, err := runGo(goBin, filepath.Dir(compatDir), "build", "-o", talchaosBin, "./cmd/talchaos"); err != nil {
		t.Fatalf("build talchaos: %v\n%s", err, out)
	}

	if talosctlBin, err = cachedTalosctl(goBin, compatDir, talosVersion); err != nil {
		t.Fatal(err)
	}

	return talchaosBin, talosctlBin
}

// A node whose time servers never answer (`talchaos up --fault
// '{kind: time-unsynced, node: cp1}'`), driven with the real talosctl as in
// talos #6493: `talosctl bootstrap` gets FailedPrecondition "time is not in
// sync yet", `get timestatus` says not synced, etcd waits "for time sync",
// and `talosctl time` shows the NTP query timing out.
func TestTimeUnsyncedAgainstUp(t *testing.T) {
	talchaosBin, talosctlBin := upBinaries(t)

	dir := filepath.Join(t.TempDir(), "cluster")
	simTmp := filepath.Join(t.TempDir(), "tmp")

	if err := os.MkdirAll(simTmp, 0o700); err != nil {
		t.Fatal(err)
	}

	up := startUp(t, talchaosBin, dir, simTmp, "--control-planes", "1", "--fault", "{kind: time-unsynced, node: cp1}")
	if !strings.Contains(up.out.String(), "fault time-unsynced-0 (time-unsynced) on cp1: until up exits") {
		t.Errorf("up does not say it holds the fault:\n%s", up.out.String())
	}

	inv := readInventory(t, filepath.Join(dir, "inventory.yaml"))
	n := inv.Nodes[0]
	cp := n.Address

	res := &results{t: t}
	defer res.summary()

	tc := &talosctl{t: t, bin: talosctlBin, talosconfig: filepath.Join(dir, "talosconfig")}

	out, err := tc.run("apply-config", "--insecure", "-n", cp, "-f", filepath.Join(dir, n.Config))
	res.check(err == nil, "apply-config --insecure -n %s", cp).detail(err, out)

	out, err = tc.poll(60*time.Second, func(out string, err error) bool { return err == nil }, "-n", cp, "version")
	res.check(err == nil, "-n %s version after apply (left maintenance)", cp).detail(err, out)

	// Until CRI is up: "bootstrap is not available yet"; then the time sync's.
	out, err = tc.poll(60*time.Second, func(out string, err error) bool {
		return err != nil && !strings.Contains(out, "bootstrap is not available yet")
	}, "bootstrap")
	res.check(err != nil && strings.Contains(out, "code = FailedPrecondition desc = time is not in sync yet"),
		"bootstrap with the time unsynced: FailedPrecondition \"time is not in sync yet\"").detail(err, out)

	out, err = tc.run("-n", cp, "get", "timestatus")
	res.check(err == nil && match(out, `(?m)^`+regexp.QuoteMeta(cp)+`\s+runtime\s+TimeStatus\s+node\s+\d+\s+false\s*$`),
		"-n %s get timestatus: not synced", cp).detail(err, out)

	waiting := func(out string, err error) bool {
		return err == nil && match(out, `(?m)^STATE\s+Waiting\s*$`) && strings.Contains(out, "Waiting for time sync")
	}
	out, err = tc.poll(30*time.Second, waiting, "-n", cp, "service", "etcd")
	res.check(waiting(out, err), "-n %s service etcd: Waiting for time sync", cp).detail(err, out)

	out, err = tc.run("-n", cp, "time")
	res.check(err != nil && match(out, `error querying NTP server "time\.cloudflare\.com": read udp `+regexp.QuoteMeta(cp)+`:\d+->162\.159\.200\.1:123: i/o timeout`),
		"-n %s time: the NTP query times out", cp).detail(err, out)
}

// Kubernetes on `talchaos up --bootstrap --kubernetes`: the real talosctl
// takes the admin kubeconfig from a control plane, and the real kubectl,
// through the cluster endpoint, sees the kubernetes endpoints list every
// control plane once the bootstrap is done.
func TestKubernetesAgainstUp(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}

	talchaosBin, talosctlBin := upBinaries(t)

	// Without the kube-apiserver binary, or without the right to add the
	// nodes' addresses, the sim target refuses a scenario with Kubernetes
	// before anything starts, saying which: nothing to test here.
	plan := exec.Command(talchaosBin, "run", "happy-path-kubernetes", "--plan", "--report-dir", t.TempDir())
	if out, err := plan.CombinedOutput(); err != nil {
		if strings.Contains(string(out), "kubernetes binaries not found") || strings.Contains(string(out), "CAP_NET_ADMIN") {
			t.Skipf("no Kubernetes here: %s", out)
		}

		t.Fatalf("talchaos run happy-path-kubernetes --plan: %v\n%s", err, out)
	}

	dir, inv, cps, workers := upCluster(t, talchaosBin, "--bootstrap", "--kubernetes", "--workers", "1")

	res := &results{t: t}
	defer res.summary()

	tc := &talosctl{t: t, bin: talosctlBin, talosconfig: filepath.Join(dir, "talosconfig")}

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	out, err := tc.poll(2*time.Minute, func(_ string, err error) bool { return err == nil }, "-n", cps[0], "kubeconfig", kubeconfig, "--force")
	res.check(err == nil, "-n %s kubeconfig (after the bootstrap)", cps[0]).detail(err, out)

	want := slices.Sorted(slices.Values(cps))
	deadline := time.Now().Add(3 * time.Minute)

	var got []string

	for {
		ctx, cancel := context.WithTimeout(context.Background(), pollAttemptTimeout)
		o, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "get", "endpoints", "kubernetes", "-n", "default",
			"-o", "jsonpath={.subsets[*].addresses[*].ip}").Output()
		cancel()

		out = string(o)
		got = slices.Sorted(slices.Values(strings.Fields(out)))

		if (err == nil && slices.Equal(got, want)) || time.Now().After(deadline) {
			break
		}

		time.Sleep(time.Second)
	}

	res.check(slices.Equal(got, want), "kubectl get endpoints kubernetes -n default lists every control plane %v", want).detail(nil, out)

	o, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "namespaces", "-o", "name").CombinedOutput()
	res.check(err == nil && strings.Contains(string(o), "namespace/kube-system"), "kubectl get namespaces").detail(err, string(o))

	// Every node's kubelet registers its Node, and each turns Ready.
	nodes := len(cps) + len(workers)
	readyNodes := func() (int, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), pollAttemptTimeout)
		defer cancel()

		o, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`).Output()

		return strings.Count(string(o), "=True"), string(o), err
	}

	var ready int

	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		ready, out, err = readyNodes()
		if (err == nil && ready == nodes) || time.Now().After(deadline) {
			break
		}
	}

	res.check(ready == nodes, "kubectl get nodes: all %d nodes Ready", nodes).detail(err, out)

	// talosctl health, client side, as the field's scripts wait on it
	// (FR-001): Talos's pre-boot checks and its Kubernetes checks (nodes,
	// static pods, control plane components, kube-proxy, CoreDNS).
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	health := exec.CommandContext(ctx, talosctlBin, "--talosconfig", tc.talosconfig, "-n", cps[0], "health", "--server=false",
		"--wait-timeout", "5m", "--control-plane-nodes", strings.Join(cps, ","), "--worker-nodes", strings.Join(workers, ","))
	o, err = health.CombinedOutput()
	res.check(err == nil && strings.Contains(string(o), "waiting for coredns to report ready: OK"),
		"talosctl health --server=false (control planes and worker given)").detail(err, string(o))

	// As FR-001's runbook runs it, with no node list; and the other reads.
	readOnlyConfigured(tc, res, inv, true)

	// An upgrade of the worker drains it through the real API server: it is
	// cordoned with Talos's annotation, then uncordoned once back, Ready.
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	o, err = exec.CommandContext(ctx, talosctlBin, "--talosconfig", tc.talosconfig, "-n", workers[0], "upgrade", "--image", "ghcr.io/siderolabs/installer:v1.12.7").CombinedOutput()
	res.check(err == nil && strings.Contains(string(o), "task: cordonAndDrainNode action: STOP"), "-n %s upgrade: drained, rebooted, ready", workers[0]).detail(err, string(o))

	schedulable := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), pollAttemptTimeout)
		defer cancel()

		o, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name}:{.spec.unschedulable}:{.metadata.annotations.talos\.dev/cordoned}{"\n"}{end}`).Output()

		return string(o), err
	}

	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		out, err = schedulable()
		if (err == nil && !strings.Contains(out, ":true")) || time.Now().After(deadline) {
			break
		}
	}

	res.check(err == nil && !strings.Contains(out, ":true"), "every Node schedulable again after the worker's upgrade").detail(err, out)
}

// FR-000's cluster as written (the built-in happy-path-ipv6: IPv6 first,
// dual-stack, announced loopbacks, etcd's advertised subnets, hostnames
// solcp01-03) through talchaos up, which keeps it in a network namespace of
// its own and says how to enter it: the real talosctl, run there, lists the
// three voters by hostname with their bracketed peer URLs, reaches a node by
// its IPv4 address, and sees every address in the discovery members.
func TestIPv6AgainstUp(t *testing.T) {
	goBin := goTool(t)

	compatDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}

	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("nsenter (util-linux) is not installed: nothing enters the nodes' namespace")
	}

	talosVersion := goOut(t, goBin, compatDir, "list", "-m", "-f", "{{.Version}}", talosModule)
	if out, err := runGo(goBin, compatDir, "mod", "download", talosModule); err != nil {
		t.Skipf("the talos module %s@%s cannot be downloaded: %v\n%s", talosModule, talosVersion, err, out)
	}

	talchaosBin := filepath.Join(t.TempDir(), "talchaos")
	if out, err := runGo(goBin, filepath.Dir(compatDir), "build", "-o", talchaosBin, "./cmd/talchaos"); err != nil {
		t.Fatalf("build talchaos: %v\n%s", err, out)
	}

	talosctlBin, err := cachedTalosctl(goBin, compatDir, talosVersion)
	if err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "cluster")
	simTmp := filepath.Join(t.TempDir(), "tmp")

	if err := os.MkdirAll(simTmp, 0o700); err != nil {
		t.Fatal(err)
	}

	up := startUp(t, talchaosBin, dir, simTmp, "--from", "happy-path-ipv6", "--bootstrap")

	// "  nsenter --target PID --net -- talosctl ..." (with --user when not root)
	var enter []string

	for _, line := range strings.Split(up.out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "nsenter" {
			enter = f[:slices.Index(f, "--")+1]

			break
		}
	}

	if len(enter) == 0 {
		t.Fatalf("up does not say how to enter the nodes' network namespace:\n%s", up.out.String())
	}

	talosctl := func(args ...string) (string, error) {
		cmd := exec.Command(enter[0], append(append(enter[1:], talosctlBin, "--talosconfig", filepath.Join(dir, "talosconfig")), args...)...)
		out, err := cmd.CombinedOutput()

		return string(out), err
	}

	// Peer URLs in the etcd spec's order: the AdvertisedPeerController's.
	want := []string{
		"solcp01 https://[fd00:101:fe::11]:2380,https://[fd00:101::11]:2380 false",
		"solcp02 https://[fd00:101:fe::12]:2380,https://[fd00:101::12]:2380 false",
		"solcp03 https://[fd00:101:fe::13]:2380,https://[fd00:101::13]:2380 false",
	}

	var got []string

	deadline := time.Now().Add(2 * time.Minute)

	for {
		out, err := talosctl("-n", "10.101.0.12", "etcd", "members")

		got = nil

		// NODE ID HOSTNAME PEER-URLS CLIENT-URLS LEARNER
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			if f := strings.Fields(line); len(f) == 6 {
				got = append(got, f[2]+" "+f[3]+" "+f[5])
			}
		}

		slices.Sort(got)

		if err == nil && slices.Equal(got, want) {
			t.Logf("talosctl -n 10.101.0.12 etcd members:\n%s", out)

			break
		}

		if time.Now().After(deadline) {
			t.Fatalf("talosctl etcd members: %v\n%s\nwant %q", err, out, want)
		}

		time.Sleep(time.Second)
	}

	out, err := talosctl("-n", "fd00:101::13", "get", "members")
	if err != nil || strings.Count(out, `"fd00:101::1`) != 3 || !strings.Contains(out, `["10.101.0.11","fd00:101::11","fd00:101:fe::11"]`) {
		t.Errorf("talosctl get members: %v\n%s", err, out)
	}

	if _, exited := up.interrupt(stopDeadline); !exited {
		t.Fatal("talchaos up did not stop on SIGINT")
	}

	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("up left %s: %v", dir, err)
	}
}

// A rolling upgrade as an operator's script runs it (`talosctl upgrade -n
// NODE`, which waits: the reply's actor, the sequence's events, the node
// back and ready, its boot ID changed) against `talchaos up --bootstrap`:
// every control plane in turn, then the worker. The installer image is named,
// never pulled. After each control plane the cluster is back to every
// voter; at the end every node reports the installed version. A reference
// that does not parse is refused with machined's text.
func TestUpgradeAgainstUp(t *testing.T) {
	talchaosBin, talosctlBin := upBinaries(t)

	dir, _, cps, workers := upCluster(t, talchaosBin, "--bootstrap", "--workers", "1")

	res := &results{t: t}
	defer res.summary()

	tc := &talosctl{t: t, bin: talosctlBin, talosconfig: filepath.Join(dir, "talosconfig")}

	allVoters := func(out string, err error) bool {
		members, learners := parseMembers(out)

		return err == nil && members == len(cps) && learners == 0
	}

	out, err := tc.poll(3*time.Minute, allVoters, "-n", cps[0], "etcd", "members")
	res.check(allVoters(out, err), "every control plane a voter after the bootstrap").detail(err, out)

	const image = "ghcr.io/siderolabs/installer:v1.12.7"

	out, err = tc.run("-n", cps[0], "upgrade", "--image", "ghcr.io/Siderolabs/installer:v1.12.7")
	res.check(err != nil && strings.Contains(out, `error validating installer image "ghcr.io/Siderolabs/installer:v1.12.7": failed to parse image reference`),
		"upgrade with an image reference that does not parse is refused").detail(err, out)

	for _, node := range append(slices.Clone(cps), workers...) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		o, err := exec.CommandContext(ctx, talosctlBin, "--talosconfig", tc.talosconfig, "-n", node, "upgrade", "--image", image).CombinedOutput()
		cancel()

		t.Logf("$ talosctl -n %s upgrade --image %s\n%s%s", node, image, o, errLine(err))
		res.check(err == nil, "-n %s upgrade --image %s: the node reboots and is ready", node, image).detail(err, string(o))

		if slices.Contains(cps, node) {
			out, err = tc.poll(3*time.Minute, allVoters, "-n", node, "etcd", "members")
			res.check(allVoters(out, err), "every control plane a voter after %s's upgrade", node).detail(err, out)
		}
	}

	all := strings.Join(append(slices.Clone(cps), workers...), ",")
	out, err = tc.run("-n", all, "version", "--short")
	res.check(err == nil && strings.Count(out, "Tag:         v1.12.7") == len(cps)+len(workers),
		"every node reports v1.12.7 after the rolling upgrade").detail(err, out)

	// talosctl reboot and shutdown wait on the same events: reboot until
	// the node is back and ready with another boot ID, shutdown until its
	// services stop.
	out, err = tc.run("-n", cps[1], "reboot")
	res.check(err == nil && strings.Contains(out, "post check passed"), "-n %s reboot: back and ready", cps[1]).detail(err, out)

	out, err = tc.poll(3*time.Minute, allVoters, "-n", cps[0], "etcd", "members")
	res.check(allVoters(out, err), "every control plane a voter after the reboot").detail(err, out)

	out, err = tc.run("-n", workers[0], "shutdown")
	res.check(err == nil && strings.Contains(out, "events check condition met"), "-n %s shutdown: its services stop", workers[0]).detail(err, out)
}

// upCluster runs `talchaos up` with args in a directory of the test's and
// returns it, its inventory and the control planes' and workers' addresses.
func upCluster(t *testing.T, talchaosBin string, args ...string) (dir string, inv *inventory, cps, workers []string) {
	t.Helper()

	dir = filepath.Join(t.TempDir(), "cluster")
	simTmp := filepath.Join(t.TempDir(), "tmp")

	if err := os.MkdirAll(simTmp, 0o700); err != nil {
		t.Fatal(err)
	}

	startUp(t, talchaosBin, dir, simTmp, args...)

	inv = readInventory(t, filepath.Join(dir, "inventory.yaml"))

	for _, n := range inv.Nodes {
		if n.Role == "controlplane" {
			cps = append(cps, n.Address)
		} else {
			workers = append(workers, n.Address)
		}
	}

	return dir, inv, cps, workers
}
