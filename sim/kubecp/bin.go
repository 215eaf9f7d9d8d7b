// Package kubecp is a simulated control plane's Kubernetes: the real
// kube-apiserver, given the files and flags Talos v1.12.6 renders for its
// static pod (internal/app/machined/pkg/controllers/k8s/control_plane_static_pod.go,
// render_secrets_static_pod.go, render_config_static_pods.go and the secrets
// controllers), and found on disk where `make kube` builds it.
//
// The binary is built from k8s.io/kubernetes in its own module (kube/apiserver
// in the talchaos checkout): k8s.io/kubernetes needs a replace line per staging
// module, which must stay out of talchaos's main module.
package kubecp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Version is the Kubernetes release the simulated control plane runs: the
// k8s.io/kubernetes version kube/apiserver/go.mod requires (a test keeps
// them equal). Talos v1.12.6 ships 1.35.2 by default; the module proxy serves
// 1.35.1 whole (see kube/apiserver/go.mod).
const Version = "v1.35.1"

// APIServerBinary is the kube-apiserver program's file name.
const APIServerBinary = "kube-apiserver"

// EnvDir names the directory holding the Kubernetes binaries, before any
// other place is looked at.
const EnvDir = "TALCHAOS_KUBE_DIR"

// BuildCommand is what builds the binaries, for error messages.
const BuildCommand = "make kube (in the talchaos checkout)"

// CacheDir is where `make kube` puts the binaries of Version:
// $XDG_CACHE_HOME/talchaos/kube/<Version> (~/.cache/... by default).
func CacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}

	return filepath.Join(base, "talchaos", "kube", Version), nil
}

// ErrNotFound is returned (wrapped) when the binaries are in none of the
// places looked at.
var ErrNotFound = errors.New("kubernetes binaries not found")

// Locate finds kube-apiserver: in dir when it is set (a flag), else in
// $TALCHAOS_KUBE_DIR when that is set, else beside the running executable,
// else in CacheDir. The error names every place looked at and the command
// that builds the binaries.
func Locate(dir string) (string, error) {
	var places []string

	switch {
	case dir != "":
		places = append(places, dir)
	case os.Getenv(EnvDir) != "":
		places = append(places, os.Getenv(EnvDir))
	default:
		if exe, err := os.Executable(); err == nil {
			places = append(places, filepath.Dir(exe))
		}

		if cache, err := CacheDir(); err == nil {
			places = append(places, cache)
		}
	}

	for _, p := range places {
		path := filepath.Join(p, APIServerBinary)

		fi, err := os.Stat(path)
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return path, nil
		}

		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", path, err)
		}
	}

	return "", fmt.Errorf("%w: %s %s is in none of %s; build it with %s",
		ErrNotFound, APIServerBinary, Version, strings.Join(places, ", "), BuildCommand)
}
