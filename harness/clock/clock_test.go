package clock

import (
	"math"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	for _, tc := range []struct {
		scale     float64
		wantScale float64
		wall      time.Duration // of 60 s of Talos time
	}{
		{60, 60, time.Second},
		{1, 1, time.Minute},
		{0, 1, time.Minute},
		{-3, 1, time.Minute},
		{0.5, 1, time.Minute},
		{math.NaN(), 1, time.Minute},
		{math.Inf(1), 1, time.Minute},
		{2.5, 2.5, 24 * time.Second},
	} {
		c := New(tc.scale)
		if c.Scale() != tc.wantScale || c.Wall(time.Minute) != tc.wall || c.Talos(tc.wall) != time.Minute {
			t.Errorf("New(%v): scale %v, Wall(1m) %v, Talos(%v) %v; want %v, %v, 1m", tc.scale, c.Scale(), c.Wall(time.Minute), tc.wall, c.Talos(tc.wall), tc.wantScale, tc.wall)
		}
	}

	var zero Clock
	if zero.Scale() != 1 || zero.Wall(time.Second) != time.Second {
		t.Errorf("the zero Clock is not real time: %v", zero.Scale())
	}

	c := New(60)
	if got := c.WallAtLeast(time.Second, 50*time.Millisecond); got != 50*time.Millisecond {
		t.Errorf("WallAtLeast(1s, 50ms) at 60x = %v", got)
	}

	if got := c.TalosMs(1500); got != 90000 {
		t.Errorf("TalosMs(1500) at 60x = %d", got)
	}

	if got := c.TalosString(8400 * time.Millisecond); got != "8m24s" {
		t.Errorf("TalosString(8.4s) at 60x = %s", got)
	}

	if got := c.TalosString(-time.Second); got != "0s" {
		t.Errorf("TalosString(-1s) = %s", got)
	}

	f, ok := c.Floored("etcd heartbeat interval", 100*time.Millisecond, 50*time.Millisecond)
	if !ok || f.Modelled != 3*time.Second || f.Talos != 100*time.Millisecond {
		t.Errorf("Floored(100ms, 50ms) at 60x = %+v, %v; want 3s modelled", f, ok)
	}

	if _, ok := c.Floored("promote window", 10*time.Minute, 50*time.Millisecond); ok {
		t.Error("a floor far below the scaled interval binds")
	}
}
