package sim

import (
	"fmt"
	"time"

	"github.com/talchaos/talchaos/fakes/talosapi"
)

// Profile holds the Talos timers and behaviours of one Talos line, in Talos time
// (TALOS-FIDELITY.md §1). The simulator divides every duration by the time scale.
type Profile struct {
	Name    talosapi.Profile
	Version string // reported by the Version RPC

	// Join loop (buildInitialCluster): retry.Constant(30m, units 3s, jitter 1s), 30s per attempt.
	JoinTimeout        time.Duration
	JoinInterval       time.Duration
	JoinJitter         time.Duration
	JoinAttemptTimeout time.Duration
	JoinNagInterval    time.Duration
	// AdoptUnnamedLearner: on "Peer URLs already exists", adopt an unnamed learner
	// carrying our peer URL (v1.14+).
	AdoptUnnamedLearner bool

	// Promote loop: 10 minutes in all, then it exits for good.
	PromoteWindow         time.Duration
	PromoteInterval       time.Duration
	PromoteJitter         time.Duration
	PromoteAttemptTimeout time.Duration
	// PromoteEndpointTimeout bounds each endpoint (main); zero: endpoints share the attempt.
	PromoteEndpointTimeout time.Duration
	// PromoteVotersFirst tries voting members first and drops the node's own endpoint (main).
	PromoteVotersFirst bool

	// Health check of the etcd service.
	HealthInitialDelay time.Duration
	HealthPeriod       time.Duration
	HealthTimeout      time.Duration

	// EtcdDialTimeout is Talos's etcd client dial timeout.
	EtcdDialTimeout time.Duration
	// RestartInterval is restart.Forever's pause between runs of a failed service.
	RestartInterval time.Duration

	// EtcdImage is the etcd image the machine config defaults to
	// (constants.EtcdImage and DefaultEtcdVersion of the profile's machinery):
	// errors of the pre stage's pull name it.
	EtcdImage string

	// Simulated machine timings (not Talos timers, but scaled alike).
	LeaveMaintenance time.Duration // from an accepted config to the API switching to mutual TLS
	ServiceWait      time.Duration // a service's "Waiting for ..." stage
	RebootDuration   time.Duration // from going down to the API answering again
}

func baseProfile() Profile {
	return Profile{
		JoinTimeout:        30 * time.Minute,
		JoinInterval:       3 * time.Second,
		JoinJitter:         time.Second,
		JoinAttemptTimeout: 30 * time.Second,
		JoinNagInterval:    30 * time.Second,

		PromoteWindow:         10 * time.Minute,
		PromoteInterval:       15 * time.Second,
		PromoteJitter:         time.Second,
		PromoteAttemptTimeout: 30 * time.Second,

		HealthInitialDelay: 5 * time.Second,
		HealthPeriod:       20 * time.Second,
		HealthTimeout:      15 * time.Second,

		EtcdDialTimeout: 5 * time.Second,
		RestartInterval: 5 * time.Second,

		LeaveMaintenance: 2 * time.Second,
		ServiceWait:      4 * time.Second,
		RebootDuration:   30 * time.Second,
	}
}

// ProfileFor returns the named profile.
func ProfileFor(name string) (Profile, error) {
	p := baseProfile()

	switch talosapi.Profile(name) {
	case talosapi.V112:
		p.Name, p.Version = talosapi.V112, "v1.12.6" // the source the profile is read from
		p.EtcdImage = "registry.k8s.io/etcd:v3.6.8"
	case talosapi.V113:
		p.Name, p.Version = talosapi.V113, "v1.13.9"
		p.EtcdImage = "registry.k8s.io/etcd:v3.6.12"
	case talosapi.V114:
		p.Name, p.Version = talosapi.V114, "v1.14.1"
		p.EtcdImage = "registry.k8s.io/etcd:3.7.1"
		p.AdoptUnnamedLearner = true
	case talosapi.Main:
		p.Name, p.Version = talosapi.Main, "v1.15.0-alpha.0"
		p.EtcdImage = "registry.k8s.io/etcd:3.7.1"
		p.AdoptUnnamedLearner = true
		p.PromoteInterval = 2 * time.Second
		p.PromoteAttemptTimeout = time.Minute
		p.PromoteEndpointTimeout = 5 * time.Second
		p.PromoteVotersFirst = true
	default:
		return Profile{}, fmt.Errorf("unknown talos profile %q", name)
	}

	return p, nil
}
