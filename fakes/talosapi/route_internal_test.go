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
