// Package kubecp is a simulated cluster's Kubernetes: the real control plane
// (kube-apiserver, kube-controller-manager, kube-scheduler), given the files
// and flags Talos v1.12.6 renders for its static pods
// (internal/app/machined/pkg/controllers/k8s/control_plane_static_pod.go,
// render_secrets_static_pod.go, render_config_static_pods.go and the secrets
// controllers), KWOK's controller as each node's kubelet, and where `make
// kube` builds them.
//
// The control plane is one binary (hyperkube) built from k8s.io/kubernetes in
// its own module (kube/hyperkube in the talchaos checkout): k8s.io/kubernetes
// needs a replace line per staging module, which must stay out of talchaos's
// main module. KWOK is built from its own module (kube/kwok).
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
// k8s.io/kubernetes version kube/hyperkube/go.mod requires (a test keeps
// them equal). Talos v1.12.6 ships 1.35.2 by default; the module proxy serves
// 1.35.1 whole (see kube/hyperkube/go.mod).
const Version = "v1.35.1"

// KwokVersion is the sigs.k8s.io/kwok release kube/kwok builds (a test keeps
// them equal).
const KwokVersion = "v0.7.0"

// The binaries' file names.
const (
	HyperkubeBinary = "hyperkube"
	KwokBinary      = "kwok"
)

// Binaries are the programs a Kubernetes-enabled cluster runs.
type Binaries struct {
	// Hyperkube runs the control plane's components: its first argument
	// is kube-apiserver, kube-controller-manager or kube-scheduler.
	Hyperkube string
	// Kwok is the simulated kubelet.
	Kwok string
}

// EnvDir names the directory holding the Kubernetes binaries, before any
// other place is looked at.
const EnvDir = "TALCHAOS_KUBE_DIR"

// BuildCommand is what builds the binaries, for error messages.
const BuildCommand = "make kube (in the talchaos checkout)"

// CacheDir is where `make kube` puts the binaries:
// $XDG_CACHE_HOME/talchaos/kube/<Version>-kwok-<KwokVersion> (~/.cache/...
// by default).
func CacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}

	return filepath.Join(base, "talchaos", "kube", Version+"-kwok-"+KwokVersion), nil
}

// ErrNotFound is returned (wrapped) when the binaries are in none of the
// places looked at.
var ErrNotFound = errors.New("kubernetes binaries not found")

// Locate finds the binaries, both in one place: in dir when it is set (a
// flag), else in $TALCHAOS_KUBE_DIR when that is set, else beside the
// running executable, else in CacheDir. The error names every place looked
// at and the command that builds the binaries.
func Locate(dir string) (Binaries, error) {
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
		hyperkube, err := executable(filepath.Join(p, HyperkubeBinary))
		if err != nil {
			return Binaries{}, err
		}

		kwok, err := executable(filepath.Join(p, KwokBinary))
		if err != nil {
			return Binaries{}, err
		}

		if hyperkube && kwok {
			return Binaries{Hyperkube: filepath.Join(p, HyperkubeBinary), Kwok: filepath.Join(p, KwokBinary)}, nil
		}
	}

	return Binaries{}, fmt.Errorf("%w: %s %s and %s %s are in none of %s; build them with %s",
		ErrNotFound, HyperkubeBinary, Version, KwokBinary, KwokVersion, strings.Join(places, ", "), BuildCommand)
}

// executable reports whether path is an executable file; an error other
// than its absence is returned.
func executable(path string) (bool, error) {
	fi, err := os.Stat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("%s: %w", path, err)
	}

	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0, nil
}
