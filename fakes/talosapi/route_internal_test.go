package talosapi

import (
	"testing"
	"time"
)

// apid's reconnect to a peer (internal/app/apid/pkg/backend/apid.go
// GetConnection): gRPC's default backoff capped at 15 s, a 20 s minimum
// connect timeout, in Talos time.
func TestPeerConnectParamsScale(t *testing.T) {
	for _, tc := range []struct {
		scale               float64
		base, max, minConnx time.Duration
	}{
		{0, time.Second, 15 * time.Second, 20 * time.Second},
		{1, time.Second, 15 * time.Second, 20 * time.Second},
		{10, 100 * time.Millisecond, 1500 * time.Millisecond, 2 * time.Second},
		{60, time.Second / 60, 250 * time.Millisecond, ConnectFloor},
	} {
		var wall func(time.Duration) time.Duration
		if tc.scale > 0 {
			wall = func(talos time.Duration) time.Duration { return time.Duration(float64(talos) / tc.scale) }
		}

		p := (&peers{wall: wall}).connectParams()
		if p.Backoff.BaseDelay != tc.base || p.Backoff.MaxDelay != tc.max || p.MinConnectTimeout != tc.minConnx || p.Backoff.Multiplier != 1.6 {
			t.Errorf("scale %g: %+v, want base %s max %s min connect %s", tc.scale, p, tc.base, tc.max, tc.minConnx)
		}
	}
}

// The upgrade mutex's session lease (MinimumEtcdUpgradeLeaseLockSeconds) is
// Talos time: a mutex an interrupted upgrade left behind blocks the next one
// for a minute of the cluster's time, at least UpgradeMutexTTLFloor of wall.
func TestUpgradeMutexTTLScales(t *testing.T) {
	for _, tc := range []struct {
		scale float64
		want  int
	}{{0, 60}, {1, 60}, {10, 6}, {20, 3}, {60, 3}} {
		var wall func(time.Duration) time.Duration
		if tc.scale > 0 {
			wall = func(talos time.Duration) time.Duration { return time.Duration(float64(talos) / tc.scale) }
		}

		if got := (&Server{opts: Options{Wall: wall}}).upgradeMutexTTLSeconds(); got != tc.want {
			t.Errorf("scale %g: TTL %d s, want %d", tc.scale, got, tc.want)
		}
	}
}
