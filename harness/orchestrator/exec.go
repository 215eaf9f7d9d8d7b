package orchestrator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/talchaos/talchaos/harness/childproc"
	"github.com/talchaos/talchaos/harness/kubeconfig"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/harness/target"
)

// Exec runs the user's own bootstrap command. It runs in a fresh temporary
// directory (removed afterwards) with the inherited environment plus:
//
//	TALOSCONFIG              the talosconfig, written there (0600)
//	TALCHAOS_NODES           "name=address ..." in node order
//	TALCHAOS_CONTROLPLANES   control-plane addresses, space-separated
//	TALCHAOS_WORKERS         worker addresses, space-separated
//	TALCHAOS_BOOTSTRAP_NODE  the bootstrap node's address
//	TALCHAOS_ENDPOINTS       every node's Talos API endpoint (host:port), in node order
//	TALCHAOS_CONFIG_DIR      the directory holding <name>.yaml machine configs (0600)
//	TALCHAOS_CONFIG_<NAME>   one node's machine config file (TALCHAOS_CONFIG_CP1)
//	TALCHAOS_RUN_ID          the talchaos run, also recorded in its temp dirs' markers
//	KUBECONFIG               with Kubernetes, the cluster's admin kubeconfig (0600), as
//	                         `talosctl kubeconfig` would write it once the cluster is up
//	TALCHAOS_UPGRADE_IMAGE   with orchestrator.upgradeTo, the installer image to upgrade
//	                         every node to once the bootstrap is done
//	TALCHAOS_CLUSTER_ENDPOINT
//	                         with cluster.network.endpoint, the cluster's Talos API
//	                         endpoint (host:port: a shared IP, which answers only once
//	                         etcd runs), for a command that takes it for talosctl -e
//
// Its stdout and stderr go to the event log line by line ("orchestrator.exec").
// It dies with talchaos: when the context ends its whole process group is
// killed, if talchaos itself is killed the kernel kills the command
// (Pdeathsig), and what the command left running (a grandchild that outlives
// it) carries TALCHAOS_RUN_ID, by which the next talchaos run finds and kills
// it (package scratch).
type Exec struct {
	// Command is the program and its arguments; a program containing a slash
	// is relative to talchaos's working directory, not to the temporary one.
	Command []string
}

// Name implements Orchestrator.
func (*Exec) Name() string { return "exec" }

// Exec output handling.
const (
	// maxLine splits longer output lines into several events.
	maxLine = 64 << 10
	// drainAfterExit bounds the wait for output still buffered in the pipes once
	// the process group is gone (a child that left the group may hold them open).
	drainAfterExit = 2 * time.Second
)

// Run implements Orchestrator.
func (e *Exec) Run(ctx context.Context, env *Env) error {
	if len(e.Command) == 0 || e.Command[0] == "" {
		return errors.New("exec orchestrator: no command")
	}

	program, err := resolveProgram(e.Command[0])
	if err != nil {
		return fmt.Errorf("bootstrap command: %w", err)
	}

	dir, err := scratch.MkdirTemp("talchaos-exec-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir) //nolint:errcheck

	vars, err := e.prepare(env, dir)
	if err != nil {
		return err
	}

	return e.run(ctx, env, program, dir, vars)
}

// resolveProgram finds the program as exec.LookPath does, as an absolute path
// so that the temporary working directory does not change what it names.
func resolveProgram(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}

	return filepath.Abs(path)
}

// envName is TALCHAOS_CONFIG_<NAME>: the node name upper-cased, any character
// that cannot be in a shell variable name replaced by '_'.
func envName(node string) string {
	var b strings.Builder

	b.WriteString("TALCHAOS_CONFIG_")

	for _, r := range strings.ToUpper(node) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}

	return b.String()
}

// prepare writes the talosconfig and the machine configs into dir and returns
// the variables to add to the command's environment.
func (e *Exec) prepare(env *Env, dir string) ([]string, error) {
	if env.Talosconfig == nil {
		return nil, errors.New("exec orchestrator: no talosconfig")
	}

	boot, ok := env.node(env.BootstrapNode)
	if !ok {
		return nil, fmt.Errorf("bootstrap node %q is not in the cluster", env.BootstrapNode)
	}

	// Marshal rather than Save: Save records the path in the shared config.
	tc, err := env.Talosconfig.Bytes()
	if err != nil {
		return nil, fmt.Errorf("talosconfig: %w", err)
	}

	talosconfig := filepath.Join(dir, "talosconfig")
	if err := scratch.WriteSecret(talosconfig, tc); err != nil {
		return nil, err
	}

	configs := filepath.Join(dir, "configs")
	if err := os.Mkdir(configs, 0o700); err != nil {
		return nil, err
	}

	var nodes, cps, workers, endpoints []string

	vars := []string{"TALOSCONFIG=" + talosconfig, "TALCHAOS_CONFIG_DIR=" + configs, scratch.Env()}
	seen := map[string]string{}

	for _, n := range env.Nodes {
		name := envName(n.Name)
		if other, dup := seen[name]; dup {
			return nil, fmt.Errorf("nodes %q and %q would share the variable %s", other, n.Name, name)
		}

		seen[name] = n.Name

		if n.Name == "" || strings.ContainsAny(n.Name, `/\`) || n.Name == "." || n.Name == ".." {
			return nil, fmt.Errorf("node name %q cannot name a file", n.Name)
		}

		path := filepath.Join(configs, n.Name+".yaml")
		if err := scratch.WriteSecret(path, n.Config); err != nil {
			return nil, err
		}

		vars = append(vars, name+"="+path)
		nodes = append(nodes, n.Name+"="+n.Address)
		endpoints = append(endpoints, n.Endpoint)

		switch n.Role {
		case target.ControlPlane:
			cps = append(cps, n.Address)
		case target.Worker:
			workers = append(workers, n.Address)
		}
	}

	if env.Kubernetes {
		path, err := writeKubeconfig(env, dir)
		if err != nil {
			return nil, err
		}

		vars = append(vars, "KUBECONFIG="+path)
	}

	// A scenario with a rolling upgrade: the command upgrades every node
	// to this image once its bootstrap is done.
	if env.UpgradeTo != "" {
		vars = append(vars, "TALCHAOS_UPGRADE_IMAGE="+env.UpgradeTo)
	}

	if env.ClusterEndpoint != "" {
		vars = append(vars, "TALCHAOS_CLUSTER_ENDPOINT="+env.ClusterEndpoint)
	}

	return append(vars,
		"TALCHAOS_NODES="+strings.Join(nodes, " "),
		"TALCHAOS_CONTROLPLANES="+strings.Join(cps, " "),
		"TALCHAOS_WORKERS="+strings.Join(workers, " "),
		"TALCHAOS_BOOTSTRAP_NODE="+boot.Address,
		"TALCHAOS_ENDPOINTS="+strings.Join(endpoints, " "),
	), nil
}

// writeKubeconfig writes the admin kubeconfig a control plane's config
// makes (Talos generates it from the same cluster section on request).
func writeKubeconfig(env *Env, dir string) (string, error) {
	data, err := kubeconfig.AdminFor(env.Nodes)
	if err != nil {
		return "", err
	}

	path := filepath.Join(dir, "kubeconfig")

	return path, scratch.WriteSecret(path, data)
}

func (e *Exec) run(ctx context.Context, env *Env, program, dir string, vars []string) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer outR.Close() //nolint:errcheck

	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close() //nolint:errcheck

		return err
	}
	defer errR.Close() //nolint:errcheck

	cmd := exec.CommandContext(ctx, program, e.Command[1:]...)
	cmd.Args[0] = e.Command[0]
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), vars...)
	cmd.Stdout = outW
	cmd.Stderr = errW
	// Its own group, killed as a whole; killed by the kernel if talchaos dies.
	childproc.Prepare(cmd)

	env.step("exec bootstrap command: " + quoteArgs(e.Command))

	started, waited := childproc.StartLocked(cmd)

	err = <-started
	// The child holds its own copies; the readers see EOF once every process
	// that inherited them is gone.
	outW.Close() //nolint:errcheck
	errW.Close() //nolint:errcheck

	if err != nil {
		env.step("bootstrap command did not start: " + err.Error())

		return fmt.Errorf("bootstrap command: %w", err)
	}

	var wg sync.WaitGroup

	wg.Go(func() { streamLines(outR, "stdout: ", env) })
	wg.Go(func() { streamLines(errR, "stderr: ", env) })

	waitErr := <-waited

	// The leader is reaped; whatever it left behind in its group goes too.
	childproc.KillGroup(cmd.Process.Pid) //nolint:errcheck

	drained := make(chan struct{})

	go func() {
		wg.Wait()
		close(drained)
	}()

	select {
	case <-drained:
	case <-time.After(drainAfterExit):
		outR.Close() //nolint:errcheck
		errR.Close() //nolint:errcheck
		<-drained
	}

	return e.result(ctx, env, cmd, waitErr)
}

// ExitError is the exec command's non-zero exit.
type ExitError struct{ Code int }

func (e *ExitError) Error() string {
	return fmt.Sprintf("bootstrap command exited with code %d", e.Code)
}

// ExitCode is the exec command's exit status in an orchestrator's error: 0
// for nil, the code of an ExitError, and false for any other error (the
// command was killed or never ran).
func ExitCode(err error) (int, bool) {
	var ee *ExitError

	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &ee):
		return ee.Code, true
	}

	return 0, false
}

func (e *Exec) result(ctx context.Context, env *Env, cmd *exec.Cmd, waitErr error) error {
	state := cmd.ProcessState

	switch {
	case ctx.Err() != nil && (state == nil || !state.Success()):
		env.step("bootstrap command killed: " + ctx.Err().Error())

		return fmt.Errorf("bootstrap command killed: %w", ctx.Err())
	case state == nil:
		env.step("bootstrap command failed: " + waitErr.Error())

		return fmt.Errorf("bootstrap command: %w", waitErr)
	case state.Success():
		env.step("bootstrap command exited with code 0")

		return nil
	}

	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		env.step("bootstrap command killed by signal " + ws.Signal().String())

		return fmt.Errorf("bootstrap command killed by signal %s", ws.Signal())
	}

	env.step(fmt.Sprintf("bootstrap command exited with code %d", state.ExitCode()))

	return &ExitError{Code: state.ExitCode()}
}

// streamLines adds every line read from r to the event log.
func streamLines(r io.Reader, prefix string, env *Env) {
	br := bufio.NewReaderSize(r, maxLine)

	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			text := strings.TrimRight(string(line), "\r\n")
			if text != "" || err == nil {
				env.Log.Add("", "orchestrator.exec", prefix+text)
			}
		}

		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return
		}
	}
}

func quoteArgs(args []string) string {
	out := make([]string, len(args))

	for i, a := range args {
		if a != "" && !strings.ContainsAny(a, " \t\n\"'\\$`|&;<>()*?[]#~") {
			out[i] = a
		} else {
			out[i] = strconv.Quote(a)
		}
	}

	return strings.Join(out, " ")
}
