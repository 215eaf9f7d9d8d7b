//go:build !race

package sim

const raceDetector = false

// joinAttemptFloor bounds from below the scaled deadline of a join attempt
// (MemberList, MemberAddAsLearner, MemberList): a deadline that passes after
// etcd applied the add leaves an unstarted learner whose peer URL the next
// attempt collides with, which a real node's 30 s never sees. Twice the
// etcdOpFloor: a joiner's first attempt starts before the first member
// serves and waits in its member list for that member's first election, a
// start at real speed (0.8-1.1 s of happy-path-kubernetes's first attempts on
// an idle machine); under make test's load that wait and the add no longer fit
// in 2 s, and the happy path lost its add (docs/measurements.md, "Stop 40").
const joinAttemptFloor = 2 * etcdOpFloor
