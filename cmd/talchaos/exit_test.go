package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/harness/secretbundle"
	"github.com/talchaos/talchaos/harness/syncbuf"
	"github.com/talchaos/talchaos/sim"
)

// Every way a talchaos process can end, with the real binary: the report is
// written, and nothing of the run is left (temp dirs, processes, ports); what a
// SIGKILLed run leaves is removed by the next run; `up` cleans its --dir as its
// help says.
func TestExitsAreClean(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the talchaos binary against simulated clusters")
	}

	bin := filepath.Join(t.TempDir(), "talchaos")

	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	for _, tc := range []struct {
		name string
		stop func(p *cliProcess)
		want string
	}{
		{"SIGINT", func(p *cliProcess) { p.signal(os.Interrupt) }, "interrupted by SIGINT"},
		{"SIGTERM", func(p *cliProcess) { p.signal(syscall.SIGTERM) }, "interrupted by SIGTERM"},
		{"SIGHUP", func(p *cliProcess) { p.signal(syscall.SIGHUP) }, "interrupted by SIGHUP"},
		{"closed stdout", func(p *cliProcess) { p.closeStdout() }, "interrupted by a closed stdout (EPIPE)"},
	} {
		t.Run("run/"+tc.name, func(t *testing.T) {
			tmp := privateTmp(t)
			reportDir := filepath.Join(t.TempDir(), "report")

			p := startCLI(t, bin, tmp, "run", "happy-path", "--report-dir", reportDir)
			p.waitFor(t, orchestratorEvent)

			run := runIDIn(t, tmp)
			addrs := p.nodeAddresses(t)

			tc.stop(p)
			p.wait(t, exitHarness)

			r := readReport(t, filepath.Join(reportDir, "report.json"))
			if r.Verdict != result.Error || r.Error != tc.want {
				t.Errorf("report verdict %q error %q, want error %q", r.Verdict, r.Error, tc.want)
			}

			if !strings.Contains(p.stderr.String(), "talchaos: "+tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, p.stderr.String())
			}

			assertNothingLeft(t, tmp, run)
			assertPortsFree(t, addrs)
		})
	}

	// A run in a network namespace of its own (cluster.network): the signal
	// reaches the talchaos inside, which stops its nodes and writes its
	// report; nothing is left.
	t.Run("run in its own network namespace/SIGINT", func(t *testing.T) {
		tmp := privateTmp(t)
		reportDir := filepath.Join(t.TempDir(), "report")

		p := startCLI(t, bin, tmp, "run", "happy-path-ipv6", "--report-dir", reportDir)
		p.waitFor(t, orchestratorEvent)

		run := runIDIn(t, tmp)

		p.signal(os.Interrupt)
		p.wait(t, exitHarness)

		if r := readReport(t, filepath.Join(reportDir, "report.json")); r.Verdict != result.Error || r.Error != "interrupted by SIGINT" {
			t.Errorf("report verdict %q error %q", r.Verdict, r.Error)
		}

		if strings.Contains(p.stderr.String(), "still stopping") {
			t.Errorf("the one SIGINT was taken for two:\n%s", p.stderr.String())
		}

		assertNothingLeft(t, tmp, run)
	})

	// An exec command and the child it left running die with the run.
	t.Run("run/SIGTERM during exec", func(t *testing.T) {
		tmp := privateTmp(t)
		reportDir := filepath.Join(t.TempDir(), "report")

		p, run, command, child := startExecRun(t, bin, tmp, reportDir)

		p.signal(syscall.SIGTERM)
		p.wait(t, exitHarness)

		if r := readReport(t, filepath.Join(reportDir, "report.json")); r.Verdict != result.Error || r.Error != "interrupted by SIGTERM" {
			t.Errorf("report verdict %q error %q", r.Verdict, r.Error)
		}

		waitGone(t, command, "the exec command")
		waitGone(t, child, "the exec command's child")
		assertNothingLeft(t, tmp, run)
	})

	// A SIGKILLed run cleans nothing; its watchdog does, at once: the temp
	// dirs with their keys and etcd data, the exec command's child.
	t.Run("run/SIGKILL: its watchdog reaps", func(t *testing.T) {
		tmp := privateTmp(t)

		p, killed, command, child := startExecRun(t, bin, tmp, filepath.Join(t.TempDir(), "report"))

		if w := watchdogs(tmp); len(w) != 1 {
			t.Fatalf("watchdogs of the run: %v, want one", w)
		}

		p.signal(syscall.SIGKILL)
		p.wait(t, -1)

		waitGone(t, command, "the exec command")
		waitGone(t, child, "the killed run's grandchild")
		eventually(t, "the watchdog's reap", func() error {
			if left, _ := filepath.Glob(filepath.Join(tmp, "talchaos-*")); len(left) > 0 { //nolint:errcheck
				return fmt.Errorf("left in TMPDIR: %v", left)
			}

			if w := watchdogs(tmp); len(w) > 0 {
				return fmt.Errorf("watchdog %v still runs", w)
			}

			return nil
		})
		assertNothingLeft(t, tmp, killed)
	})

	// A run SIGKILLed together with its watchdog (kill -9 -1, the OOM
	// killer) cleans nothing: the next one does.
	t.Run("run/SIGKILL with its watchdog then another run", func(t *testing.T) {
		tmp := privateTmp(t)

		p, killed, command, child := startExecRun(t, bin, tmp, filepath.Join(t.TempDir(), "report"))

		killWatchdog(t, tmp)
		p.signal(syscall.SIGKILL)
		p.wait(t, -1)

		// The kernel kills the command itself (Pdeathsig); its child, the
		// temp dirs with their keys and etcd data stay.
		waitGone(t, command, "the exec command")

		for _, pattern := range []string{"talchaos-sim-*", "talchaos-exec-*"} {
			if m, _ := filepath.Glob(filepath.Join(tmp, pattern)); len(m) != 1 { //nolint:errcheck
				t.Errorf("the killed run left %v, want one %s", m, pattern)
			}
		}

		if !carries(child, killed) {
			t.Fatalf("the killed run's grandchild %d is not running with its run id", child)
		}

		next := startCLI(t, bin, tmp, "run", execScenario(t, "true"), "--report-dir", filepath.Join(t.TempDir(), "report"))
		next.wait(t, -1)

		if want := regexp.MustCompile(`removed 2 temp dir\(s\) and killed [1-9]\d* process\(es\) left by killed talchaos run\(s\)`); !want.MatchString(next.stderr.String()) {
			t.Errorf("the next run does not say it reaped (%s):\n%s", want, next.stderr.String())
		}

		waitGone(t, child, "the killed run's grandchild")
		assertNothingLeft(t, tmp, killed)
	})

	// A run stopped outright for six seconds (SIGSTOP, then SIGCONT: as a
	// paused VM looks from inside), six Talos minutes at 60x, whose
	// expectation fails: the stall is in its history, and the verdict is
	// error (exit 3), not fail, naming it.
	t.Run("run/SIGSTOP for six seconds", func(t *testing.T) {
		tmp := privateTmp(t)
		reportDir := filepath.Join(t.TempDir(), "report")
		file := filepath.Join(t.TempDir(), "one-voter.yaml")

		// Three control planes form; the expectation of one voter fails.
		if err := os.WriteFile(file, []byte("apiVersion: talchaos/v1\nkind: Scenario\nname: one-voter\ntimeScale: 60\n"+
			"cluster: {controlPlanes: 3}\norchestrator: {name: resilient}\nexpect: {voters: 1}\n"), 0o600); err != nil {
			t.Fatal(err)
		}

		p := startCLI(t, bin, tmp, "run", file, "--report-dir", reportDir)
		p.waitFor(t, orchestratorEvent)

		p.signal(syscall.SIGSTOP)
		time.Sleep(6 * time.Second)
		p.signal(syscall.SIGCONT)
		p.wait(t, exitHarness)

		r := readReport(t, filepath.Join(reportDir, "report.json"))
		if r.Verdict != result.Error || !strings.Contains(r.Error, "the host did not run talchaos for 6") {
			t.Errorf("report verdict %q error %q, want error naming the stall", r.Verdict, r.Error)
		}

		if !slices.ContainsFunc(r.History.Entries, func(e history.Entry) bool { return e.Stall != nil && e.Stall.DurationMs >= 5900 }) {
			t.Errorf("the history records no stall of six seconds")
		}

		if !strings.Contains(p.stdout.String(), "verdict: ERROR") {
			t.Errorf("stdout does not tell the verdict:\n%s", p.stdout.String())
		}
	})

	// hunt: an interrupted seed is reported as interrupted, neither passed nor
	// failed; replay is a run like any other.
	t.Run("hunt and replay/SIGINT, SIGTERM", func(t *testing.T) {
		tmp := privateTmp(t)
		reports := t.TempDir()
		flag := filepath.Join(t.TempDir(), "second")
		// The first seed passes at once; every later run sleeps until stopped.
		scenario := execScenario(t, fmt.Sprintf(`if [ -e %[1]s ]; then sleep 600 & echo "started $$ $!"; sleep 600; else touch %[1]s; fi`, flag))

		hunt := startCLI(t, bin, tmp, "hunt", scenario, "--seeds", "1-3", "--parallel", "1", "--report-dir", reports)
		hunt.waitFor(t, regexp.MustCompile(`^seed 1\s+PASS`))
		waitForGlob(t, filepath.Join(tmp, "talchaos-exec-*")) // seed 2's command runs

		run := runIDIn(t, tmp)

		hunt.signal(os.Interrupt)
		hunt.wait(t, exitHarness)

		if r := readReport(t, filepath.Join(reports, "seed-2", "report.json")); r.Verdict != result.Error || r.Error != "interrupted by SIGINT" {
			t.Errorf("seed 2 report verdict %q error %q", r.Verdict, r.Error)
		}

		if _, err := os.Stat(filepath.Join(reports, "seed-3")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("seed 3 ran after the interrupt: %v", err)
		}

		out := hunt.stdout.String()
		if !strings.Contains(out, "expectations held for 1 of 1 seeds") || strings.Contains(out, "failing seeds") {
			t.Errorf("hunt summary counts the interrupted seed:\n%s", out)
		}

		assertNothingLeft(t, tmp, run)

		replayDir := filepath.Join(t.TempDir(), "replay")

		// The report's exec command runs again only with consent.
		replay := startCLI(t, bin, tmp, "replay", filepath.Join(reports, "seed-1"), "--allow-exec", "--report-dir", replayDir)
		replay.waitFor(t, execStarted)

		run = runIDIn(t, tmp)

		replay.signal(syscall.SIGTERM)
		replay.wait(t, exitHarness)

		if r := readReport(t, filepath.Join(replayDir, "report.json")); r.Verdict != result.Error || r.Error != "interrupted by SIGTERM" || r.Seed != 1 {
			t.Errorf("replay report verdict %q error %q seed %d", r.Verdict, r.Error, r.Seed)
		}

		assertNothingLeft(t, tmp, run)
	})

	t.Run("up/--dir NEW is removed", func(t *testing.T) {
		tmp := privateTmp(t)
		parent := t.TempDir()
		dir := filepath.Join(parent, "new", "lab")

		p := startCLI(t, bin, tmp, "up", "--dir", dir, "--time-scale", "60")
		p.waitFor(t, upRunning)

		for _, f := range []string{"talosconfig", "inventory.yaml", "cp1.yaml"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("up did not write %s: %v", f, err)
			}
		}

		p.signal(os.Interrupt)
		p.wait(t, exitPass)

		if _, err := os.Lstat(filepath.Join(parent, "new")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s (created by up) is still there: %v", filepath.Join(parent, "new"), err)
		}

		assertNothingLeft(t, tmp, "")
	})

	t.Run("up/--dir EXISTING keeps the user's files", func(t *testing.T) {
		tmp := privateTmp(t)
		dir := userDir(t)

		p := startCLI(t, bin, tmp, "up", "--dir", dir, "--time-scale", "60")
		p.waitFor(t, upRunning)
		p.signal(syscall.SIGTERM)
		p.wait(t, exitPass)

		onlyUsersFile(t, dir, "after up")
		assertNothingLeft(t, tmp, "")
	})

	// A SIGKILLed up leaves its keys in --dir; its watchdog removes them at
	// once, and the user's files stay. Killed with its watchdog, the next
	// talchaos removes them (a reap of the temp dirs, or the next up of that
	// --dir), and the next up starts.
	t.Run("up/--dir SIGKILL then up again", func(t *testing.T) {
		tmp := privateTmp(t)
		dir := userDir(t)

		// killedUp runs up on dir and SIGKILLs it once it runs, its
		// watchdog first unless withWatchdog.
		killedUp := func(withWatchdog bool) {
			p := startCLI(t, bin, tmp, "up", "--dir", dir, "--time-scale", "60")
			p.waitFor(t, upRunning)

			if !withWatchdog {
				killWatchdog(t, tmp)
			}

			p.signal(syscall.SIGKILL)
			p.wait(t, -1)
		}

		killedUp(true)

		eventually(t, "the watchdog's reap of --dir", func() error {
			entries, err := os.ReadDir(dir)
			if err == nil && (len(entries) != 1 || watchdogs(tmp) != nil) {
				err = fmt.Errorf("%s holds %v; watchdogs %v", dir, entries, watchdogs(tmp))
			}

			return err
		})
		onlyUsersFile(t, dir, "after the watchdog")
		assertNothingLeft(t, tmp, "")

		killedUp(false)

		if _, err := os.Stat(filepath.Join(dir, "talosconfig")); err != nil {
			t.Fatalf("the killed up's talosconfig is not there to reap: %v", err)
		}

		// Any talchaos run reaps it.
		next := startCLI(t, bin, tmp, "run", execScenario(t, "true"), "--report-dir", filepath.Join(t.TempDir(), "report"))
		next.wait(t, -1)

		onlyUsersFile(t, dir, "after the reap")

		// A killed up again; this time the next up of the same --dir reaps it.
		killedUp(false)

		p := startCLI(t, bin, tmp, "up", "--dir", dir, "--time-scale", "60")
		p.waitFor(t, upRunning)
		p.signal(syscall.SIGTERM)
		p.wait(t, exitPass)

		onlyUsersFile(t, dir, "after the next up")

		assertNothingLeft(t, tmp, "")
	})

	// Commands that only read end within a second of SIGTERM, whatever they
	// are waiting for: here doctor, whose node accepts TCP and never answers.
	t.Run("doctor/SIGTERM while a node never answers", func(t *testing.T) {
		tmp := privateTmp(t)

		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() //nolint:errcheck

		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}

				t.Cleanup(func() { c.Close() }) //nolint:errcheck
			}
		}()

		bundle, err := secretbundle.New(config.TalosVersionCurrent)
		if err != nil {
			t.Fatal(err)
		}

		in, err := generate.NewInput("blackhole", "https://127.0.0.1:6443", sim.KubernetesVersion, generate.WithSecretsBundle(bundle))
		if err != nil {
			t.Fatal(err)
		}

		cfg, err := in.Talosconfig()
		if err != nil {
			t.Fatal(err)
		}

		tc := filepath.Join(t.TempDir(), "talosconfig")
		if err := cfg.Save(tc); err != nil {
			t.Fatal(err)
		}

		p := startCLI(t, bin, tmp, "doctor", "--talosconfig", tc, "--nodes", l.Addr().String())

		// Let it reach the silent node.
		time.Sleep(time.Second)

		select {
		case <-p.done:
			t.Fatalf("doctor ended before the signal (exit %d):\n%s%s", p.code, p.stdout.String(), p.stderr.String())
		default:
		}

		p.signal(syscall.SIGTERM)
		sent := time.Now()

		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Fatal("doctor did not end within 10 s of SIGTERM")
		}

		if took := time.Since(sent); took > time.Second {
			t.Errorf("doctor took %s to end after SIGTERM, want at most 1 s", took)
		}

		if p.code == exitPass {
			t.Errorf("an interrupted doctor exited 0")
		}
	})

	t.Run("up/default temp dir is removed", func(t *testing.T) {
		tmp := privateTmp(t)

		p := startCLI(t, bin, tmp, "up", "--time-scale", "60")
		p.waitFor(t, upRunning)

		if m, _ := filepath.Glob(filepath.Join(tmp, "talchaos-up-*", scratch.MarkerFile)); len(m) != 1 { //nolint:errcheck
			t.Errorf("up's temp dir is not marked: %v", m)
		}

		p.signal(syscall.SIGHUP)
		p.wait(t, exitPass)

		assertNothingLeft(t, tmp, "")
	})
}

// up refuses to overwrite a file in an existing --dir, and leaves it alone.
func TestUpDoesNotOverwrite(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())

	dir := t.TempDir()
	tc := filepath.Join(dir, "talosconfig")

	if err := os.WriteFile(tc, []byte("the user's own"), 0o600); err != nil {
		t.Fatal(err)
	}

	code, out := run(t, "up", "--dir", dir)
	if code != exitInput || !strings.Contains(out, tc+" already exists") {
		t.Fatalf("exit %d, want 2 naming %s:\n%s", code, tc, out)
	}

	if b, err := os.ReadFile(tc); err != nil || string(b) != "the user's own" {
		t.Errorf("talosconfig = %q, %v", b, err)
	}

	if entries, _ := os.ReadDir(dir); len(entries) != 1 { //nolint:errcheck
		t.Errorf("%s holds %v", dir, entries)
	}
}

var (
	orchestratorEvent = regexp.MustCompile(`\sorchestrator\.\S+\s`)
	execStarted       = regexp.MustCompile(`orchestrator\.exec\s+stdout: started (\d+) (\d+)`)
	upRunning         = regexp.MustCompile(`running; press Ctrl-C`)
	provisioned       = regexp.MustCompile(`node\.provisioned\s+\S+ (127\.\d+\.\d+\.\d+),`)
)

// privateTmp is a TMPDIR for the processes of one test; whatever they leave
// is reaped when the test ends (after the test has checked it).
func privateTmp(t *testing.T) string {
	t.Helper()

	tmp := t.TempDir()

	t.Cleanup(func() { scratch.ReapIn(tmp) }) //nolint:errcheck

	return tmp
}

// execScenario writes a one-node scenario whose exec orchestrator runs script
// with /bin/sh.
func execScenario(t *testing.T, script string) string {
	t.Helper()

	command, err := json.Marshal([]string{"/bin/sh", "-c", script})
	if err != nil {
		t.Fatal(err)
	}

	body := fmt.Sprintf(`apiVersion: talchaos/v1
kind: Scenario
name: exec-exit
timeScale: 60
cluster:
  controlPlanes: 1
orchestrator:
  name: exec
  command: %s
expect:
  within: 20m
  settle: 1s
`, command)

	path := filepath.Join(t.TempDir(), "exec-exit.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}

	return path
}

// cliProcess is a talchaos process; its stdout is a pipe the test reads (and
// may close), its stderr a buffer.
type cliProcess struct {
	cmd    *exec.Cmd
	stdout *syncbuf.Buffer
	stderr *syncbuf.Buffer
	outR   *os.File
	lines  chan string
	done   chan struct{}
	// drained is closed once the reader has read stdout to its end.
	drained chan struct{}
	code    int
}

// startExecRun runs a scenario whose exec command starts a child and
// waits, and returns once the child runs with the run's id: the process, the
// run id, the command's and the child's pids.
func startExecRun(t *testing.T, bin, tmp, reportDir string) (p *cliProcess, run string, command, child int) {
	t.Helper()

	p = startCLI(t, bin, tmp, "run", execScenario(t, `sleep 600 & echo "started $$ $!"; sleep 600`), "--report-dir", reportDir)
	line := p.waitFor(t, execStarted)

	run = runIDIn(t, tmp)
	command, child = execPids(t, line)
	killAtEnd(t, child)

	// The child may still be inside its execve, when /proc shows no
	// environment for a moment.
	for deadline := time.Now().Add(10 * time.Second); !carries(child, run); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command's child %d does not carry %s=%s", child, scratch.EnvVar, run)
		}
	}

	return p, run, command, child
}

func startCLI(t *testing.T, bin, tmp string, args ...string) *cliProcess {
	t.Helper()

	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}

	p := &cliProcess{
		cmd:     exec.Command(bin, args...),
		stdout:  &syncbuf.Buffer{},
		stderr:  &syncbuf.Buffer{},
		outR:    outR,
		lines:   make(chan string, 1<<16),
		done:    make(chan struct{}),
		drained: make(chan struct{}),
	}

	p.cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	p.cmd.Stdout = outW
	p.cmd.Stderr = p.stderr
	// Its own process group: a Ctrl-C in the terminal running the test does
	// not reach it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	err = p.cmd.Start()

	outW.Close() //nolint:errcheck

	if err != nil {
		t.Fatal(err)
	}

	go func() {
		br := bufio.NewReader(outR)

		for {
			line, err := br.ReadString('\n')
			p.stdout.Write([]byte(line)) //nolint:errcheck

			// Never blocks the reader (so stdout is drained whether or
			// not a test is waiting for lines); waitFor reads them as
			// they come, well within the buffer.
			if line != "" {
				select {
				case p.lines <- line:
				default:
				}
			}

			if err != nil {
				close(p.lines)
				close(p.drained)

				return
			}
		}
	}()

	go func() {
		p.cmd.Wait() //nolint:errcheck
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()

	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill() //nolint:errcheck
			<-p.done
		}

		outR.Close() //nolint:errcheck

		if t.Failed() {
			t.Logf("talchaos %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), p.stdout.String(), p.stderr.String())
		}
	})

	return p
}

// waitFor waits for a stdout line matching re and returns it.
func (p *cliProcess) waitFor(t *testing.T, re *regexp.Regexp) string {
	t.Helper()

	deadline := time.After(90 * time.Second)

	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("talchaos ended its output before a line matching %s", re)
			}

			if re.MatchString(line) {
				return line
			}
		case <-deadline:
			t.Fatalf("no line matching %s within 90s", re)
		}
	}
}

func (p *cliProcess) signal(sig os.Signal) {
	p.cmd.Process.Signal(sig) //nolint:errcheck
}

// closeStdout closes the reading end of talchaos's stdout, as `| head -1` does
// when head exits.
func (p *cliProcess) closeStdout() {
	p.outR.Close() //nolint:errcheck
}

// wait waits for the process to exit with the code (any code if negative).
func (p *cliProcess) wait(t *testing.T, code int) {
	t.Helper()

	deadline := time.After(90 * time.Second)

	select {
	case <-p.done:
	case <-deadline:
		t.Fatal("talchaos did not exit within 90s")
	}

	// Everything it wrote is read: its exit does not mean the reader has
	// drained the pipe.
	select {
	case <-p.drained:
	case <-deadline:
		t.Fatal("talchaos's stdout did not end within 90s of its start of waiting")
	}

	if code >= 0 && p.code != code {
		t.Errorf("exit code %d, want %d", p.code, code)
	}
}

// nodeAddresses are the node addresses the run printed.
func (p *cliProcess) nodeAddresses(t *testing.T) []string {
	t.Helper()

	var out []string

	for _, m := range provisioned.FindAllStringSubmatch(p.stdout.String(), -1) {
		out = append(out, m[1])
	}

	if len(out) == 0 {
		t.Fatalf("no node addresses printed:\n%s", p.stdout.String())
	}

	return out
}

// runIDIn is the run id in the marker of the run's sim dir.
func runIDIn(t *testing.T, tmp string) string {
	t.Helper()

	markers, _ := filepath.Glob(filepath.Join(tmp, "talchaos-sim-*", scratch.MarkerFile)) //nolint:errcheck
	if len(markers) != 1 {
		t.Fatalf("sim dir markers in %s: %v, want one", tmp, markers)
	}

	data, err := os.ReadFile(markers[0])
	if err != nil {
		t.Fatal(err)
	}

	var owner scratch.Owner
	if err := json.Unmarshal(data, &owner); err != nil || owner.Run == "" {
		t.Fatalf("marker %s: %s (%v)", markers[0], data, err)
	}

	return owner.Run
}

func execPids(t *testing.T, line string) (command, child int) {
	t.Helper()

	m := execStarted.FindStringSubmatch(line)
	command, _ = strconv.Atoi(m[1])
	child, _ = strconv.Atoi(m[2])

	return command, child
}

// killAtEnd makes sure the process does not outlive the test.
func killAtEnd(t *testing.T, pid int) {
	t.Helper()

	p, err := os.FindProcess(pid) // a pidfd: never another process with the pid
	if err != nil {
		return
	}

	t.Cleanup(func() { p.Kill(); p.Release() }) //nolint:errcheck
}

// carries reports whether pid runs with the run id in its environment.
func carries(pid int, run string) bool {
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")

	return err == nil && slices.ContainsFunc(bytes.Split(environ, []byte{0}), func(e []byte) bool {
		return string(e) == scratch.EnvVar+"="+run
	})
}

// carriers are the live processes carrying the run id.
func carriers(run string) []int {
	entries, _ := os.ReadDir("/proc") //nolint:errcheck

	var out []int

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && carries(pid, run) {
			out = append(out, pid)
		}
	}

	return out
}

// gone reports whether pid no longer runs (a zombie waiting for its reaper
// does not run).
func gone(pid int) bool { return !scratch.Alive(pid) }

func waitGone(t *testing.T, pid int, what string) {
	t.Helper()

	deadline := time.Now().Add(30 * time.Second)

	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Errorf("%s (pid %d) still runs", what, pid)

			return
		}

		time.Sleep(20 * time.Millisecond)
	}
}

// waitForGlob waits until something matches the pattern.
func waitForGlob(t *testing.T, pattern string) {
	t.Helper()

	deadline := time.Now().Add(90 * time.Second)

	for {
		if m, _ := filepath.Glob(pattern); len(m) > 0 { //nolint:errcheck
			return
		}

		if time.Now().After(deadline) {
			t.Fatalf("nothing matches %s after 90s", pattern)
		}

		time.Sleep(20 * time.Millisecond)
	}
}

// watchdogs are the live watchdog processes of runs started with TMPDIR=tmp:
// their environment carries both.
func watchdogs(tmp string) []int {
	entries, _ := os.ReadDir("/proc") //nolint:errcheck

	var out []int

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}

		environ, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || gone(pid) {
			continue
		}

		var inTmp, watchdog bool

		for v := range bytes.SplitSeq(environ, []byte{0}) {
			inTmp = inTmp || string(v) == "TMPDIR="+tmp
			watchdog = watchdog || bytes.HasPrefix(v, []byte(scratch.WatchdogEnv+"="))
		}

		if inTmp && watchdog {
			out = append(out, pid)
		}
	}

	return out
}

// killWatchdog SIGKILLs the watchdog of the run started with TMPDIR=tmp, so
// that what the run leaves when it is killed too stays for the next run.
func killWatchdog(t *testing.T, tmp string) {
	t.Helper()

	w := watchdogs(tmp)
	if len(w) != 1 {
		t.Fatalf("watchdogs of runs in %s: %v, want one", tmp, w)
	}

	syscall.Kill(w[0], syscall.SIGKILL) //nolint:errcheck
	waitGone(t, w[0], "the run's watchdog")
}

// eventually retries check until it passes or 30 s have gone by.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()

	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := check()
		if err == nil {
			return
		}

		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// assertNothingLeft checks that no talchaos dir is left in tmp, no watchdog
// of a run in tmp runs, and no process carries the run id.
func assertNothingLeft(t *testing.T, tmp, run string) {
	t.Helper()

	if left, _ := filepath.Glob(filepath.Join(tmp, "talchaos-*")); len(left) > 0 { //nolint:errcheck
		t.Errorf("left in TMPDIR: %v", left)
	}

	if left := watchdogs(tmp); len(left) > 0 {
		t.Errorf("watchdogs still running: %v", left)
	}

	if run == "" {
		return
	}

	if left := carriers(run); len(left) > 0 {
		t.Errorf("processes of run %s still running: %v", run, left)
	}
}

// assertPortsFree checks that the nodes' Talos API and etcd ports can be bound.
func assertPortsFree(t *testing.T, addrs []string) {
	t.Helper()

	for _, a := range addrs {
		for _, port := range []string{"50000", "2379", "2380"} {
			l, err := net.Listen("tcp", net.JoinHostPort(a, port))
			if err != nil {
				t.Errorf("%s:%s still in use: %v", a, port, err)

				continue
			}

			l.Close() //nolint:errcheck
		}
	}
}

// A write to a closed stdout interrupts the command once, naming the cause,
// and every later write is dropped without an error.
func TestStdoutWriterInterruptsOnEPIPE(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close() //nolint:errcheck

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)

	out := &stdoutWriter{w: w, cancel: cancel}

	if n, err := out.Write([]byte("first\n")); n != 6 || err != nil || ctx.Err() != nil {
		t.Fatalf("write to an open pipe: %d, %v (ctx %v)", n, err, ctx.Err())
	}

	r.Close() //nolint:errcheck

	for range 2 {
		if n, err := out.Write([]byte("lost\n")); n != 5 || err != nil {
			t.Errorf("write to a closed pipe: %d, %v; want it dropped", n, err)
		}
	}

	if got := interruptedRun(ctx, fmt.Errorf("interrupted: %w", context.Canceled)); ctx.Err() == nil || got == nil || got.Error() != "interrupted by a closed stdout (EPIPE)" {
		t.Errorf("ctx %v, run error %v", ctx.Err(), got)
	}

	if got := interruptedRun(ctx, errors.New("observer: gone")); got == nil || got.Error() != "interrupted by a closed stdout (EPIPE) (observer: gone)" {
		t.Errorf("run error %v", got)
	}

	if got := interruptedRun(context.Background(), errors.New("x")); got == nil || got.Error() != "x" {
		t.Errorf("an uninterrupted run's error became %v", got)
	}
}

// userDir is a directory holding one file of the user's, notes.txt.
func userDir(t *testing.T) string {
	t.Helper()

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}

	return dir
}

// onlyUsersFile checks that a userDir holds its file, unchanged, and nothing
// else.
func onlyUsersFile(t *testing.T, dir, when string) {
	t.Helper()

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}

	if len(entries) != 1 || entries[0].Name() != "notes.txt" {
		t.Errorf("%s %s holds %v, want only notes.txt", when, dir, entries)
	}

	if b, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(b) != "mine" {
		t.Errorf("%s notes.txt = %q, %v", when, b, err)
	}
}
