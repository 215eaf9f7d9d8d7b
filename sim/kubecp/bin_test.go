package kubecp_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/sim/kubecp"
)

// The version talchaos looks for is the one kube/apiserver builds.
func TestVersionIsTheBuiltOne(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "kube", "apiserver", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}

	m := regexp.MustCompile(`(?m)^\tk8s.io/kubernetes (v[0-9.]+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("kube/apiserver/go.mod requires no k8s.io/kubernetes")
	}

	if string(m[1]) != kubecp.Version {
		t.Errorf("kube/apiserver builds %s, talchaos looks for %s", m[1], kubecp.Version)
	}
}

func TestLocate(t *testing.T) {
	dir := t.TempDir()

	_, err := kubecp.Locate(dir)
	if !errors.Is(err, kubecp.ErrNotFound) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "make kube") {
		t.Errorf("missing: %v, want ErrNotFound naming %s and make kube", err, dir)
	}

	bin := filepath.Join(dir, kubecp.APIServerBinary)
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := kubecp.Locate(dir); !errors.Is(err, kubecp.ErrNotFound) {
		t.Errorf("not executable: %v, want ErrNotFound", err)
	}

	if err := os.Chmod(bin, 0o700); err != nil {
		t.Fatal(err)
	}

	if got, err := kubecp.Locate(dir); err != nil || got != bin {
		t.Errorf("Locate = %q, %v; want %s", got, err, bin)
	}

	t.Setenv(kubecp.EnvDir, dir)

	if got, err := kubecp.Locate(""); err != nil || got != bin {
		t.Errorf("from $%s: %q, %v; want %s", kubecp.EnvDir, got, err, bin)
	}
}
