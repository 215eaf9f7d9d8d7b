//go:build race

package sim

// raceDetector: the race detector slows etcd's real-time work several times
// over, so the sim keeps a lower time scale to stay faithful (MaxScale).
const raceDetector = true

// joinAttemptFloor is higher than norace.go's: under the race detector a
// 3 + 50 formation beside the other packages' tests saw a member add outlast
// 3 s.
const joinAttemptFloor = 3 * etcdOpFloor
