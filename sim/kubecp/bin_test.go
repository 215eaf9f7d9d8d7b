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

// The versions talchaos looks for are the ones kube/hyperkube and kube/kwok build.
func TestVersionsAreTheBuiltOnes(t *testing.T) {
	for _, c := range []struct{ module, requires, want string }{
		{"hyperkube", "k8s.io/kubernetes", kubecp.Version},
		{"kwok", "sigs.k8s.io/kwok", kubecp.KwokVersion},
	} {
		data, err := os.ReadFile(filepath.Join("..", "..", "kube", c.module, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}

		m := regexp.MustCompile(`(?m)^\t` + regexp.QuoteMeta(c.requires) + ` (v[0-9.]+)$`).FindSubmatch(data)
		if m == nil {
			t.Fatalf("kube/%s/go.mod requires no %s", c.module, c.requires)
		}

		if string(m[1]) != c.want {
			t.Errorf("kube/%s builds %s %s, talchaos looks for %s", c.module, c.requires, m[1], c.want)
		}
	}
}

func TestLocate(t *testing.T) {
	dir := t.TempDir()

	_, err := kubecp.Locate(dir)
	if !errors.Is(err, kubecp.ErrNotFound) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "make kube") {
		t.Errorf("missing: %v, want ErrNotFound naming %s and make kube", err, dir)
	}

	want := kubecp.Binaries{Hyperkube: filepath.Join(dir, kubecp.HyperkubeBinary), Kwok: filepath.Join(dir, kubecp.KwokBinary)}

	for _, bin := range []string{want.Hyperkube, want.Kwok} {
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := kubecp.Locate(dir); !errors.Is(err, kubecp.ErrNotFound) {
		t.Errorf("not executable: %v, want ErrNotFound", err)
	}

	if err := os.Chmod(want.Hyperkube, 0o700); err != nil {
		t.Fatal(err)
	}

	if _, err := kubecp.Locate(dir); !errors.Is(err, kubecp.ErrNotFound) {
		t.Errorf("kwok not executable: %v, want ErrNotFound", err)
	}

	if err := os.Chmod(want.Kwok, 0o700); err != nil {
		t.Fatal(err)
	}

	if got, err := kubecp.Locate(dir); err != nil || got != want {
		t.Errorf("Locate = %+v, %v; want %+v", got, err, want)
	}

	t.Setenv(kubecp.EnvDir, dir)

	if got, err := kubecp.Locate(""); err != nil || got != want {
		t.Errorf("from $%s: %+v, %v; want %+v", kubecp.EnvDir, got, err, want)
	}
}
