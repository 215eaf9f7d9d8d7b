//go:build race

package sim

// raceDetector: the race detector slows etcd's real-time work several times
// over, so the sim keeps a lower time scale to stay faithful (MaxScale).
const raceDetector = true
