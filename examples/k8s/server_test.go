package k8s

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/simtest"
)

// The example's manifests are what a real kube-apiserver accepts: `kubectl
// apply --dry-run=server` of each file against the kube-apiserver of a
// simulated control plane with Kubernetes (what `talchaos up --kubernetes`
// runs), which validates and defaults every object and runs admission
// without storing anything. A Job the server would refuse is refused here
// (checked with one: TestManifests's client-side reading passes it).
func TestManifestsOnTheServer(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the Kubernetes example is not checked on a server")
	}

	if err := sim.KubernetesAvailable(); err != nil {
		t.Skipf("no Kubernetes here: %v", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	kubeconfig := bootstrapped(t, ctx)

	run := func(args ...string) (string, error) {
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		defer ccancel()

		var stderr bytes.Buffer

		cmd := exec.CommandContext(cctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()

		return string(out) + stderr.String(), err
	}

	// The manifests name no namespace; admission wants the one they go to.
	poll(t, ctx, "kubectl create namespace talchaos", func() error {
		out, err := run("create", "namespace", "talchaos")
		if err != nil && !strings.Contains(out, "AlreadyExists") {
			return &cmdError{err, out}
		}

		return nil
	})

	for _, tc := range []struct {
		file string
		want []string // what the server says it would have created
	}{
		{"nightly-shards.yaml", []string{"persistentvolumeclaim/talchaos-results", "job.batch/talchaos-nightly-shards"}},
		{"nightly-merge.yaml", []string{"job.batch/talchaos-nightly-merge"}},
	} {
		out, err := run("apply", "--dry-run=server", "--namespace", "talchaos", "-o", "name", "-f", tc.file)
		if err != nil {
			t.Errorf("kubectl apply --dry-run=server -f %s: %v\n%s", tc.file, err, out)

			continue
		}

		if got := strings.Fields(out); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("kubectl apply --dry-run=server -f %s printed %q, want %q", tc.file, got, tc.want)
		}
	}

	// A Job the API refuses: the check can fail.
	data, err := os.ReadFile("nightly-shards.yaml")
	if err != nil {
		t.Fatal(err)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, bytes.Replace(data, []byte("completionMode: Indexed"), []byte("completionMode: Sideways"), 1), 0o600); err != nil {
		t.Fatal(err)
	}

	if out, err := run("apply", "--dry-run=server", "--namespace", "talchaos", "-f", bad); err == nil || !strings.Contains(out, `Unsupported value: "Sideways"`) {
		t.Errorf("a Job with completionMode Sideways: err %v, output %s; want the server's refusal", err, out)
	}
}

// bootstrapped starts one simulated control plane with Kubernetes, applies
// its config, bootstraps it and returns the path of the admin kubeconfig
// its Talos API serves.
func bootstrapped(t *testing.T, ctx context.Context) string {
	t.Helper()

	c := simtest.New(t, simtest.Options{ControlPlanes: 1, TimeScale: 30, Kubernetes: true})
	cp := c.ControlPlanes()[0]

	poll(t, ctx, "apply-config to cp1 in maintenance", func() error {
		ic, err := talosclient.Insecure(ctx, cp.Endpoint)
		if err != nil {
			return err
		}
		defer ic.Close() //nolint:errcheck

		_, err = ic.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: cp.Config, Mode: machine.ApplyConfigurationRequest_AUTO})

		return err
	})

	cl, err := talosclient.WithConfig(ctx, c.Talosconfig(), cp.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close() //nolint:errcheck

	poll(t, ctx, "bootstrap cp1", func() error { return cl.Bootstrap(ctx, &machine.BootstrapRequest{}) })

	var kubeconfig []byte

	poll(t, ctx, "the admin kubeconfig from cp1", func() (err error) { kubeconfig, err = cl.Kubeconfig(ctx); return err })

	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	return file
}

// poll calls f every half second until it returns nil; the context's end
// fails the test with f's last error.
func poll(t *testing.T, ctx context.Context, what string, f func() error) {
	t.Helper()

	for {
		err := f()
		if err == nil {
			return
		}

		select {
		case <-ctx.Done():
			t.Fatalf("%s: not done before the test's deadline: %v", what, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

type cmdError struct {
	err error
	out string
}

func (e *cmdError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.out) }
