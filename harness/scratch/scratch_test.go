package scratch

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// privateTmp points os.TempDir() at a fresh directory for the test.
func privateTmp(t *testing.T) string {
	t.Helper()

	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)

	return dir
}

func me(t *testing.T) Owner {
	t.Helper()

	o, err := self()
	if err != nil {
		t.Skipf("this system cannot identify processes: %v", err)
	}

	return o
}

// markedDir makes a dir in parent marked with owner, holding some content.
func markedDir(t *testing.T, parent, name string, owner Owner) string {
	t.Helper()

	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(filepath.Join(dir, "pki", "etcd"), 0o700); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(filepath.Join(dir, "pki", "etcd", "ca.key"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}

	data, err := json.Marshal(owner)
	if err != nil {
		t.Fatal(err)
	}

	if err := writeMarker(dir, data); err != nil {
		t.Fatal(err)
	}

	return dir
}

// deadOwner is an owner that ran on this machine and is gone: its pid is that
// of a process that has exited (and been reaped), its run id is new.
func deadOwner(t *testing.T) Owner {
	t.Helper()

	o := me(t)

	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}

	o.PID = cmd.Process.Pid
	o.Run = randomRun(t)

	return o
}

func randomRun(t *testing.T) string {
	t.Helper()

	b := make([]byte, 16)
	rand.Read(b) //nolint:errcheck // never fails

	return hex.EncodeToString(b)
}

// proc is a child process of the test.
type proc struct {
	cmd  *exec.Cmd
	env  []string
	done chan struct{}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// sleeper starts `sleep 60` with extra environment entries; the test kills it
// at the end if it is still running.
func sleeper(t *testing.T, env ...string) *proc {
	t.Helper()

	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), env...)

	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	p := &proc{cmd: cmd, env: env, done: make(chan struct{})}

	go func() {
		cmd.Wait() //nolint:errcheck
		close(p.done)
	}()

	t.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck
		<-p.done
	})

	return p
}

// alive reports whether the child still runs.
func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// waitKilled waits until the child has died of SIGKILL.
func waitKilled(t *testing.T, p *proc) {
	t.Helper()

	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("process %d still runs", p.pid())

		return
	}

	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("process %d ended with %v, want SIGKILL", p.pid(), p.cmd.ProcessState)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)

	return err == nil
}

func TestParseStartTime(t *testing.T) {
	// The command name may contain spaces and parentheses.
	line := "4242 (evil) (name x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 12345 67 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"

	got, err := parseStartTime([]byte(line))
	if err != nil || got != 987654 {
		t.Fatalf("parseStartTime = %d, %v; want 987654", got, err)
	}

	for _, bad := range []string{"", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 notanumber 1"} {
		if _, err := parseStartTime([]byte(bad)); err == nil {
			t.Errorf("parseStartTime(%q) succeeded", bad)
		}
	}

	// Our own start time is stable.
	a, err1 := startTime(os.Getpid())
	b, err2 := startTime(os.Getpid())

	if err1 != nil || err2 != nil || a != b || a == 0 {
		t.Fatalf("own start time: %d %v, %d %v", a, err1, b, err2)
	}
}

func TestMkdirTempMarksTheDir(t *testing.T) {
	tmp := privateTmp(t)
	want := me(t)

	dir, err := MkdirTemp("talchaos-test-")
	if err != nil {
		t.Fatal(err)
	}

	if filepath.Dir(dir) != tmp || !strings.HasPrefix(filepath.Base(dir), "talchaos-test-") {
		t.Errorf("dir %s, want talchaos-test-* in %s", dir, tmp)
	}

	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v (%v), want 0700", st.Mode(), err)
	}

	got, ok := readMarker(dir)
	if !ok || got != want {
		t.Fatalf("marker %+v (%v), want %+v", got, ok, want)
	}

	if got.PID != os.Getpid() || !validRunID(got.Run) || got.Run != RunID() || Env() != "TALCHAOS_RUN_ID="+got.Run {
		t.Errorf("marker %+v, run id %s", got, RunID())
	}

	entries, _ := os.ReadDir(dir) //nolint:errcheck
	if len(entries) != 1 || entries[0].Name() != MarkerFile {
		t.Errorf("dir holds %v, want only the marker", entries)
	}

	for _, bad := range []string{"other-", "talchaos-a/b-", "tmp"} {
		if d, err := MkdirTemp(bad); err == nil {
			t.Errorf("MkdirTemp(%q) = %s, want an error", bad, d)
		}
	}
}

// Nothing that is not provably a dead talchaos run's own is touched.
func TestReapLeavesWhatIsNotProvablyDead(t *testing.T) {
	tmp := privateTmp(t)
	self := me(t)
	dead := deadOwner(t)

	// A live owner other than this process: a child with its real start time.
	live := sleeper(t)

	liveStart, err := startTime(live.pid())
	if err != nil {
		t.Fatal(err)
	}

	liveOwner := self
	liveOwner.PID, liveOwner.Start, liveOwner.Run = live.pid(), liveStart, randomRun(t)

	otherHost := dead
	otherHost.Host += "-elsewhere"
	otherHost.Boot = "another-boot"

	otherNS := dead
	otherNS.PIDNS = "pid:[1]"

	noRun := dead
	noRun.Run = "not-hex"

	keep := []string{
		markedDir(t, tmp, "talchaos-self", self),
		markedDir(t, tmp, "talchaos-live", liveOwner),
		markedDir(t, tmp, "talchaos-other-host", otherHost),
		markedDir(t, tmp, "talchaos-other-pidns", otherNS),
		markedDir(t, tmp, "talchaos-bad-run", noRun),
		markedDir(t, tmp, "not-talchaos", dead), // wrong name
	}

	// Unmarked, and with a marker that is not complete JSON.
	for _, name := range []string{"talchaos-unmarked", "talchaos-torn"} {
		if err := os.Mkdir(filepath.Join(tmp, name), 0o700); err != nil {
			t.Fatal(err)
		}

		keep = append(keep, filepath.Join(tmp, name))
	}

	if err := os.WriteFile(filepath.Join(tmp, "talchaos-torn", MarkerFile), []byte(`{"pid": 1, "st`), 0o600); err != nil {
		t.Fatal(err)
	}

	// A symlink named like a run dir, to a dir with a dead owner elsewhere.
	elsewhere := markedDir(t, t.TempDir(), "talchaos-target", dead)
	if err := os.Symlink(elsewhere, filepath.Join(tmp, "talchaos-link")); err != nil {
		t.Fatal(err)
	}

	keep = append(keep, filepath.Join(tmp, "talchaos-link"), elsewhere)

	// A dir whose marker is a symlink to a dead owner's marker.
	if err := os.Mkdir(filepath.Join(tmp, "talchaos-marker-link"), 0o700); err != nil {
		t.Fatal(err)
	}

	if err := os.Symlink(filepath.Join(elsewhere, MarkerFile), filepath.Join(tmp, "talchaos-marker-link", MarkerFile)); err != nil {
		t.Fatal(err)
	}

	keep = append(keep, filepath.Join(tmp, "talchaos-marker-link"))

	// Processes with ids of runs that are alive, or of no run at all.
	tagged := []*proc{
		sleeper(t, EnvVar+"="+self.Run),
		sleeper(t, EnvVar+"="+liveOwner.Run),
		sleeper(t, EnvVar+"="+otherHost.Run+"x"),
		sleeper(t, "OTHER_"+EnvVar+"="+dead.Run),
	}

	got, err := ReapIn(tmp)
	if err != nil {
		t.Fatalf("ReapIn: %v", err)
	}

	if !got.Empty() {
		t.Errorf("reaped %+v, want nothing", got)
	}

	for _, path := range keep {
		if !exists(path) {
			t.Errorf("%s was removed", path)
		}
	}

	for _, p := range append(tagged, live) {
		if !p.alive() {
			t.Errorf("process %d %v was killed", p.pid(), p.env)
		}
	}
}

func TestReapRemovesDeadRunsAndKillsTheirProcesses(t *testing.T) {
	tmp := privateTmp(t)
	self := me(t)
	dead := deadOwner(t)

	// The same pid as this process but another start time: a reused pid.
	reused := self
	reused.Start++
	reused.Run = randomRun(t)

	// A run from before the last reboot.
	rebooted := dead
	rebooted.Boot = "a-previous-boot"
	rebooted.Run = randomRun(t)

	gone := []string{
		markedDir(t, tmp, "talchaos-sim-dead", dead),
		markedDir(t, tmp, "talchaos-exec-dead", dead),
		markedDir(t, tmp, "talchaos-sim-reused", reused),
		markedDir(t, tmp, "talchaos-up-rebooted", rebooted),
	}

	// A dead run's marker left alone in a half-removed dir is still reaped.
	half := markedDir(t, tmp, "talchaos-half", dead)
	if err := os.RemoveAll(filepath.Join(half, "pki")); err != nil {
		t.Fatal(err)
	}

	gone = append(gone, half)

	kept := markedDir(t, tmp, "talchaos-sim-self", self)

	victims := []*proc{
		sleeper(t, EnvVar+"="+dead.Run),
		sleeper(t, EnvVar+"="+reused.Run),
		sleeper(t, "A=1", EnvVar+"="+rebooted.Run, "B=2"),
	}
	bystander := sleeper(t, EnvVar+"="+self.Run)

	got, err := ReapIn(tmp)
	if err != nil {
		t.Fatalf("ReapIn: %v", err)
	}

	slices.Sort(got.Dirs)
	slices.Sort(gone)

	if !slices.Equal(got.Dirs, gone) {
		t.Errorf("reaped dirs %v, want %v", got.Dirs, gone)
	}

	for _, path := range gone {
		if exists(path) {
			t.Errorf("%s is still there", path)
		}
	}

	if !exists(filepath.Join(kept, "pki", "etcd", "ca.key")) {
		t.Errorf("the live run's dir %s lost its content", kept)
	}

	for _, v := range victims {
		if !slices.Contains(got.Procs, v.pid()) {
			t.Errorf("process %d not reported killed (killed %v)", v.pid(), got.Procs)
		}

		waitKilled(t, v)
	}

	if !bystander.alive() {
		t.Error("the live run's process was killed")
	}

	// A second reap finds nothing left.
	if again, err := ReapIn(tmp); err != nil || !again.Empty() {
		t.Errorf("second reap: %+v, %v", again, err)
	}
}
