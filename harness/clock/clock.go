// Package clock converts between Talos time and wall time. Scenarios and
// Talos's timers speak Talos time; the sim divides it by the run's time scale
// (a 10-minute promote window passes in 10 s at 60x), and what the run
// records is wall time. Every conversion goes through a Clock, so there is
// one policy for a scale (below 1, NaN or infinite: real time) and one way to
// floor a scaled interval that cannot go below what the machine can do.
package clock

import (
	"math"
	"time"
)

// Clock is a run's time scale: Talos time is wall time × scale.
type Clock struct {
	scale float64
}

// Real is real time: real nodes, and a scale that says nothing.
var Real = Clock{scale: 1}

// New is the clock of a time scale. A scale below 1, NaN or infinite is real
// time: nothing in talchaos runs slower than real time, and a report read
// back is validated before its scale is used.
func New(scale float64) Clock {
	if !(scale >= 1) || math.IsInf(scale, 0) {
		return Real
	}

	return Clock{scale: scale}
}

// Scale is the time scale (1 for real time).
func (c Clock) Scale() float64 {
	if c.scale == 0 {
		return 1 // the zero Clock is real time
	}

	return c.scale
}

// Wall is how long a Talos-time span lasts on the wall clock.
func (c Clock) Wall(talos time.Duration) time.Duration {
	return time.Duration(float64(talos) / c.Scale())
}

// WallAtLeast is Wall, never below floor: a deadline or a tick that cannot
// shrink with the scale (a TLS handshake, an etcd round trip take real time).
func (c Clock) WallAtLeast(talos, floor time.Duration) time.Duration {
	return max(c.Wall(talos), floor)
}

// Talos is how long a wall-clock span lasts in Talos time.
func (c Clock) Talos(wall time.Duration) time.Duration {
	return time.Duration(float64(wall) * c.Scale())
}

// TalosMs is a wall-clock offset in milliseconds in Talos time, as a history
// records it.
func (c Clock) TalosMs(wallMs int64) int64 {
	return int64(float64(wallMs) * c.Scale())
}

// TalosString is a wall-clock span in Talos time, rounded to the second for
// people ("8m24s"); a negative span is 0s.
func (c Clock) TalosString(wall time.Duration) string {
	return max(c.Talos(wall), 0).Round(time.Second).String()
}

// Floor is an interval the scale cannot shrink all the way: Talos lets it
// last Talos, the scaled run makes it last Modelled (Talos time) because its
// wall time is floored.
type Floor struct {
	What            string
	Talos, Modelled time.Duration
}

// Floored is the floor the interval `talos`, held to at least `floor` of wall
// time, hits at this scale, if it hits one.
func (c Clock) Floored(what string, talos, floor time.Duration) (Floor, bool) {
	modelled := c.Talos(c.WallAtLeast(talos, floor))
	if modelled <= talos {
		return Floor{}, false
	}

	return Floor{What: what, Talos: talos, Modelled: modelled.Round(time.Millisecond)}, true
}
