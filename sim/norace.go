//go:build !race

package sim

const raceDetector = false

// joinAttemptFloor bounds from below the scaled deadline of a join attempt
// (MemberList, MemberAddAsLearner, MemberList): a deadline that passes after
// etcd applied the add leaves an unstarted learner whose peer URL the next
// attempt collides with, which a real node's 30 s never sees.
const joinAttemptFloor = etcdOpFloor
