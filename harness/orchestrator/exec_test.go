package orchestrator

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/constants"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim"
)

// testEnv is an Env without a cluster: three nodes on addresses nothing
// listens on, a real talosconfig and recognisable "configs".
func testEnv(t *testing.T) *Env {
	t.Helper()

	bundle, err := sim.NewSecretsBundle(config.TalosVersionCurrent)
	if err != nil {
		t.Fatal(err)
	}

	in, err := generate.NewInput("exec-test", "https://127.0.0.1:6443", constants.DefaultKubernetesVersion,
		generate.WithSecretsBundle(bundle), generate.WithEndpointList([]string{"127.0.0.1"}))
	if err != nil {
		t.Fatal(err)
	}

	tc, err := in.Talosconfig()
	if err != nil {
		t.Fatal(err)
	}

	node := func(name string, role target.Role, i int) target.Node {
		addr := "127.0.0." + strconv.Itoa(200+i)

		return target.Node{
			Name: name, Role: role, Address: addr, Endpoint: addr + ":1",
			Config: []byte("version: v1alpha1\n# machine config of " + name + ", token s3cr3t-" + name + "\n"),
		}
	}

	return &Env{
		Nodes: []target.Node{
			node("cp1", target.ControlPlane, 1),
			node("cp2", target.ControlPlane, 2),
			node("w1", target.Worker, 3),
		},
		Talosconfig:   tc,
		BootstrapNode: "cp2",
		Log:           eventlog.New(),
		Clock:         clock.New(1000),
	}
}

func messages(log *eventlog.Log, kind string) []string {
	var out []string

	for _, e := range log.Events() {
		if e.Kind == kind {
			out = append(out, e.Msg)
		}
	}

	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	return string(b)
}

func TestExecEnvironmentAndFiles(t *testing.T) {
	env := testEnv(t)
	env.ClusterEndpoint = "127.0.0.200:50000"

	out := t.TempDir()
	t.Setenv("TALCHAOS_TEST_OUT", out)

	// The command is a relative path with a slash: it names a file in the
	// working directory, not in the command's temporary directory.
	work := t.TempDir()
	t.Chdir(work)

	script := `#!/bin/sh
set -e
o="$TALCHAOS_TEST_OUT"
env | grep -E '^(TALOSCONFIG|TALCHAOS_)' | grep -v '^TALCHAOS_TEST_OUT=' | sort > "$o/env"
pwd > "$o/pwd"
cp "$TALOSCONFIG" "$o/talosconfig"
cp "$TALCHAOS_CONFIG_CP1" "$o/cp1.yaml"
cp "$TALCHAOS_CONFIG_CP2" "$o/cp2.yaml"
cp "$TALCHAOS_CONFIG_W1" "$o/w1.yaml"
stat -c '%n %a' "$TALOSCONFIG" "$TALCHAOS_CONFIG_CP1" "$TALCHAOS_CONFIG_CP2" "$TALCHAOS_CONFIG_W1" "$TALCHAOS_CONFIG_DIR" > "$o/modes"
ls "$TALCHAOS_CONFIG_DIR" > "$o/ls"
echo "args: $*"
echo "to stderr" >&2
printf 'blank next\n\nno newline at the end'
`
	if err := os.WriteFile(filepath.Join(work, "bootstrap.sh"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}

	e := &Exec{Command: []string{"./bootstrap.sh", "one", "two"}}
	if err := e.Run(t.Context(), env); err != nil {
		t.Fatalf("Run: %v\nevents: %v", err, env.Log.Events())
	}

	dir := strings.TrimSpace(readFile(t, filepath.Join(out, "pwd")))
	if dir == work || !strings.HasPrefix(filepath.Base(dir), "talchaos-exec-") {
		t.Errorf("command ran in %s, want a fresh temp dir", dir)
	}

	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s still exists after Run (stat: %v)", dir, err)
	}

	configs := filepath.Join(dir, "configs")
	want := []string{
		"TALCHAOS_BOOTSTRAP_NODE=127.0.0.202",
		"TALCHAOS_CLUSTER_ENDPOINT=127.0.0.200:50000",
		"TALCHAOS_CONFIG_CP1=" + filepath.Join(configs, "cp1.yaml"),
		"TALCHAOS_CONFIG_CP2=" + filepath.Join(configs, "cp2.yaml"),
		"TALCHAOS_CONFIG_DIR=" + configs,
		"TALCHAOS_CONFIG_W1=" + filepath.Join(configs, "w1.yaml"),
		"TALCHAOS_CONTROLPLANES=127.0.0.201 127.0.0.202",
		"TALCHAOS_ENDPOINTS=127.0.0.201:1 127.0.0.202:1 127.0.0.203:1",
		"TALCHAOS_NODES=cp1=127.0.0.201 cp2=127.0.0.202 w1=127.0.0.203",
		"TALCHAOS_RUN_ID=" + scratch.RunID(),
		"TALCHAOS_WORKERS=127.0.0.203",
		"TALOSCONFIG=" + filepath.Join(dir, "talosconfig"),
	}

	got := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(out, "env"))), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("environment:\n got %q\nwant %q", got, want)
	}

	// The talosconfig is the Env's, and loads.
	wantTC, err := env.Talosconfig.Bytes()
	if err != nil {
		t.Fatal(err)
	}

	gotTC := readFile(t, filepath.Join(out, "talosconfig"))
	if gotTC != string(wantTC) {
		t.Errorf("talosconfig differs from the Env's")
	}

	loaded, err := clientconfig.FromString(gotTC)
	if err != nil {
		t.Fatalf("talosconfig does not load: %v", err)
	}

	if loaded.Context != "exec-test" || loaded.Contexts["exec-test"] == nil || loaded.Contexts["exec-test"].Crt == "" {
		t.Errorf("talosconfig context = %q, contexts %v", loaded.Context, loaded.Contexts)
	}

	if env.Talosconfig.Path().Path != "" {
		t.Errorf("the shared talosconfig was given a path: %q", env.Talosconfig.Path().Path)
	}

	for _, n := range env.Nodes {
		if got := readFile(t, filepath.Join(out, n.Name+".yaml")); got != string(n.Config) {
			t.Errorf("%s config = %q, want %q", n.Name, got, n.Config)
		}
	}

	if got := strings.Fields(readFile(t, filepath.Join(out, "ls"))); !slices.Equal(got, []string{"cp1.yaml", "cp2.yaml", "w1.yaml"}) {
		t.Errorf("config dir holds %v", got)
	}

	wantModes := map[string]string{"talosconfig": "600", "cp1.yaml": "600", "cp2.yaml": "600", "w1.yaml": "600", "configs": "700"}

	for _, line := range strings.Split(strings.TrimSpace(readFile(t, filepath.Join(out, "modes"))), "\n") {
		path, mode, _ := strings.Cut(line, " ")
		if w := wantModes[filepath.Base(path)]; mode != w {
			t.Errorf("%s has mode %s, want %s", path, mode, w)
		}
	}

	gotLines := messages(env.Log, "orchestrator.exec")
	wantLines := []string{"stdout: args: one two", "stdout: blank next", "stdout: ", "stdout: no newline at the end", "stderr: to stderr"}

	for _, w := range wantLines {
		if !slices.Contains(gotLines, w) {
			t.Errorf("event log lacks %q; exec lines: %q", w, gotLines)
		}
	}

	if len(gotLines) != len(wantLines) {
		t.Errorf("exec lines = %q, want %q in some order", gotLines, wantLines)
	}

	steps := messages(env.Log, "orchestrator.step")
	if len(steps) != 2 || !strings.Contains(steps[0], "./bootstrap.sh one two") || steps[1] != "bootstrap command exited with code 0" {
		t.Errorf("steps = %q", steps)
	}

	// No secret reached the log: not the configs, not the talosconfig's keys.
	ctx := env.Talosconfig.Contexts[env.Talosconfig.Context]
	for _, e := range env.Log.Events() {
		for _, secret := range []string{"s3cr3t", ctx.Key, ctx.Crt, ctx.CA, "TALOSCONFIG"} {
			if strings.Contains(e.Msg, secret) {
				t.Errorf("event %q leaks %q", e.Msg, secret)
			}
		}
	}
}

func TestExecExitCode(t *testing.T) {
	env := testEnv(t)

	e := &Exec{Command: []string{"/bin/sh", "-c", "echo failing; exit 3"}}

	err := e.Run(t.Context(), env)
	if err == nil || err.Error() != "bootstrap command exited with code 3" {
		t.Fatalf("Run = %v, want exit code 3", err)
	}

	if got := messages(env.Log, "orchestrator.exec"); !slices.Equal(got, []string{"stdout: failing"}) {
		t.Errorf("exec lines = %q", got)
	}

	if steps := messages(env.Log, "orchestrator.step"); steps[len(steps)-1] != "bootstrap command exited with code 3" {
		t.Errorf("last step = %q", steps[len(steps)-1])
	}
}

func TestExecProgramNotFound(t *testing.T) {
	env := testEnv(t)

	for _, cmd := range []string{"./no-such-bootstrap", "talchaos-no-such-program"} {
		err := (&Exec{Command: []string{cmd}}).Run(t.Context(), env)
		if err == nil || !strings.Contains(err.Error(), cmd) {
			t.Errorf("Run(%s) = %v, want an error naming it", cmd, err)
		}
	}

	if err := (&Exec{}).Run(t.Context(), env); err == nil {
		t.Error("Run without a command succeeded")
	}
}

// gone reports whether pid no longer runs (it may linger as a zombie until
// whoever adopted it reaps it).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}

	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}

	// pid (comm) S ...: the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')

	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

func TestExecCancelKillsProcessGroup(t *testing.T) {
	env := testEnv(t)

	pids := make(chan int, 1)

	env.Log.OnEvent(func(e eventlog.Event) {
		if pid, ok := strings.CutPrefix(e.Msg, "stdout: child "); ok {
			n, err := strconv.Atoi(pid)
			if err == nil {
				pids <- n
			}
		}
	})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	done := make(chan error, 1)

	var dir string

	go func() {
		done <- (&Exec{Command: []string{"/bin/sh", "-c", `pwd; sleep 60 & echo "child $!"; wait`}}).Run(ctx, env)
	}()

	var child int

	select {
	case child = <-pids:
	case err := <-done:
		t.Fatalf("Run returned early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the command never reported its child")
	}

	for _, m := range messages(env.Log, "orchestrator.exec") {
		if d, ok := strings.CutPrefix(m, "stdout: /"); ok {
			dir = "/" + d
		}
	}

	if gone(child) {
		t.Fatalf("child %d is not running before the cancel", child)
	}

	start := time.Now()

	cancel()

	var err error

	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the cancel")
	}

	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("Run returned %v after the cancel, want < 1s", elapsed)
	}

	if err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want a cancellation error", err)
	}

	deadline := time.Now().Add(time.Second)
	for !gone(child) {
		if time.Now().After(deadline) {
			t.Fatalf("the shell's child %d (sleep 60) survived the cancel", child)
		}

		time.Sleep(10 * time.Millisecond)
	}

	if dir == "" {
		t.Fatal("the command's working directory was not logged")
	}

	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s still exists (stat: %v)", dir, err)
	}
}

func TestExecBackgroundChildIsCleanedUp(t *testing.T) {
	env := testEnv(t)

	start := time.Now()

	// The shell exits at once, leaving a child that holds stdout open.
	err := (&Exec{Command: []string{"/bin/sh", "-c", `sleep 60 & echo "child $!"`}}).Run(t.Context(), env)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}

	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("Run took %v: it waited for the background child", elapsed)
	}

	var child int

	for _, m := range messages(env.Log, "orchestrator.exec") {
		if pid, ok := strings.CutPrefix(m, "stdout: child "); ok {
			child, _ = strconv.Atoi(pid)
		}
	}

	if child == 0 {
		t.Fatalf("no child reported: %q", messages(env.Log, "orchestrator.exec"))
	}

	deadline := time.Now().Add(time.Second)
	for !gone(child) {
		if time.Now().After(deadline) {
			t.Fatalf("background child %d outlived the command", child)
		}

		time.Sleep(10 * time.Millisecond)
	}
}

// The command dies with talchaos: a process running Exec is SIGKILLed (no
// context to cancel, no cleanup) and the kernel kills the command. Its
// background child survives that, carrying the run id, and the next run's reap
// kills it and removes the command's temp dir.
func TestExecCommandDiesWithTalchaos(t *testing.T) {
	if os.Getenv("TALCHAOS_EXEC_HELPER") == "1" {
		env := testEnv(t)
		env.Log.OnEvent(func(e eventlog.Event) { fmt.Println(e.Msg) })

		(&Exec{Command: []string{"/bin/sh", "-c", `sleep 600 & echo "command $$ $!"; wait`}}).Run(t.Context(), env) //nolint:errcheck

		return
	}

	tmp := t.TempDir()

	helper := exec.Command(os.Args[0], "-test.run=^TestExecCommandDiesWithTalchaos$", "-test.count=1")
	helper.Env = append(os.Environ(), "TALCHAOS_EXEC_HELPER=1", "TMPDIR="+tmp)
	helper.Stderr = os.Stderr

	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}

	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}

	lines := make(chan string)

	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}

		close(lines)
	}()

	var command, child int

	for command == 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				helper.Wait() //nolint:errcheck
				t.Fatal("the helper ended before its command reported its pid")
			}

			if pids, ok := strings.CutPrefix(l, "stdout: command "); ok {
				a, b, _ := strings.Cut(pids, " ")
				command, _ = strconv.Atoi(a)
				child, _ = strconv.Atoi(b)
			}
		case <-time.After(30 * time.Second):
			// What the helper and its children were doing (seen once
			// under a loaded make test: the helper silent for 30 s).
			state := procState(helper.Process.Pid)

			helper.Process.Kill() //nolint:errcheck
			helper.Wait()         //nolint:errcheck
			t.Fatalf("the command never reported its pid; the helper and its children then:\n%s", state)
		}
	}

	// Whatever happens, the background child does not outlive the test.
	childProc, err := os.FindProcess(child)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { childProc.Kill() }) //nolint:errcheck

	if gone(command) || gone(child) {
		t.Fatalf("command %d or its child %d is not running before talchaos is killed", command, child)
	}

	helper.Process.Kill() //nolint:errcheck

	go func() {
		for range lines { //nolint:revive // drain until the pipe closes
		}
	}()

	helper.Wait() //nolint:errcheck

	waitGone := func(pid int, what string) {
		t.Helper()

		deadline := time.Now().Add(10 * time.Second)
		for !gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s %d outlived the SIGKILLed talchaos", what, pid)
			}

			time.Sleep(10 * time.Millisecond)
		}
	}

	waitGone(command, "command")

	if gone(child) {
		t.Fatalf("the background child %d died with talchaos: this test no longer shows the reap", child)
	}

	dirs, _ := filepath.Glob(filepath.Join(tmp, "talchaos-exec-*")) //nolint:errcheck
	if len(dirs) != 1 {
		t.Fatalf("exec dirs left by the killed run: %v, want one", dirs)
	}

	reaped, err := scratch.ReapIn(tmp)
	if err != nil {
		t.Fatalf("reap: %v", err)
	}

	if !slices.Equal(reaped.Dirs, dirs) || !slices.Equal(reaped.Procs, []int{child}) {
		t.Errorf("reaped %+v, want dir %v and process %d", reaped, dirs, child)
	}

	waitGone(child, "background child")

	if _, err := os.Stat(dirs[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there (%v)", dirs[0], err)
	}
}

func TestStreamLines(t *testing.T) {
	env := &Env{Log: eventlog.New()}

	long := strings.Repeat("x", maxLine+10)
	streamLines(strings.NewReader("a\r\nb\n\n"+long+"\nlast"), "stdout: ", env)

	got := messages(env.Log, "orchestrator.exec")
	want := []string{"stdout: a", "stdout: b", "stdout: ", "stdout: " + long[:maxLine], "stdout: " + long[maxLine:], "stdout: last"}

	if !slices.Equal(got, want) {
		t.Errorf("lines = %d %q..., want %d", len(got), got[:min(3, len(got))], len(want))
	}
}

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{
		"cp1":      "TALCHAOS_CONFIG_CP1",
		"w12":      "TALCHAOS_CONFIG_W12",
		"my-node":  "TALCHAOS_CONFIG_MY_NODE",
		"node.a_b": "TALCHAOS_CONFIG_NODE_A_B",
	} {
		if got := envName(in); got != want {
			t.Errorf("envName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		in      scenario.Orchestrator
		want    Orchestrator
		wantErr bool
	}{
		{in: scenario.Orchestrator{}, want: &Resilient{}},
		{in: scenario.Orchestrator{Name: "resilient"}, want: &Resilient{}},
		{in: scenario.Orchestrator{Name: "naive"}, want: &Naive{}},
		{in: scenario.Orchestrator{Name: "naive", RetryApply: true}, want: &Naive{RetryApply: true}},
		{in: scenario.Orchestrator{Name: "exec", Command: []string{"./boot", "x"}}, want: &Exec{Command: []string{"./boot", "x"}}},
		{in: scenario.Orchestrator{Name: "exec"}, wantErr: true},
		{in: scenario.Orchestrator{Name: "exec", Command: []string{""}}, wantErr: true},
		{in: scenario.Orchestrator{Name: "clever"}, wantErr: true},
	} {
		got, err := New(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("New(%+v) error = %v", tc.in, err)

			continue
		}

		if tc.wantErr {
			continue
		}

		switch w := tc.want.(type) {
		case *Resilient:
			_, ok := got.(*Resilient)
			if !ok {
				t.Errorf("New(%+v) = %T", tc.in, got)
			}
		case *Naive:
			g, ok := got.(*Naive)
			if !ok || g.RetryApply != w.RetryApply || g.BootstrapNodes != nil || g.Name() != "naive" {
				t.Errorf("New(%+v) = %#v", tc.in, got)
			}
		case *Exec:
			g, ok := got.(*Exec)
			if !ok || !slices.Equal(g.Command, w.Command) || g.Name() != "exec" {
				t.Errorf("New(%+v) = %#v", tc.in, got)
			}
		}
	}
}

// procState describes pid and its children from /proc: each one's state,
// what it waits in (wchan) and its command line, a line each.
func procState(pid int) string {
	var b strings.Builder

	describe := func(p int) {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))       //nolint:errcheck // a gone process reads empty
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", p))     //nolint:errcheck
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)) //nolint:errcheck
		fmt.Fprintf(&b, "  %d wchan %s stat %s cmd %s\n", p, wchan, strings.TrimSpace(string(stat)), strings.ReplaceAll(string(cmdline), "\x00", " "))
	}

	describe(pid)

	entries, _ := os.ReadDir("/proc") //nolint:errcheck

	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}

		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}

		// The fields after the command's closing parenthesis: state, ppid.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(pid) {
				describe(p)
			}
		}
	}

	return b.String()
}
