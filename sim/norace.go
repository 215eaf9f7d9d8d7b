//go:build !race

package sim

import "time"

const raceDetector = false

// etcdOpFloor bounds from below the scaled deadlines of calls that wait for
// etcd to commit (a join attempt's MemberAddAsLearner, the health check's
// linearizable read). etcd runs at real speed: a Talos deadline of 30 s scaled
// to half a second would expire on a loaded machine after the change was
// applied, leaving stale learners and failed health checks real nodes never
// see.
const etcdOpFloor = 2 * time.Second
