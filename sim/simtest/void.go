package simtest

import "github.com/talchaos/talchaos/harness/result"

// VoidRuns is how many times UnlessVoid makes a run while each is voided for
// a stall of the host. A VM whose vCPUs are not run for minutes under load
// has been seen (docs/measurements.md, stop 47), and a run across such a
// stall says nothing of the cluster.
const VoidRuns = 3

// UnlessVoid makes a run with run, and again, up to VoidRuns runs in all,
// while the judge voids it for a stall of the host (result.Result.Voided);
// note, if not nil, is told of each voided run. It returns the last run; a
// nil result (the run errored) is not voided. For a test of a scenario's
// verdict, on a CI runner that may stand still.
func UnlessVoid(run func() *result.Result, note func(attempt int, res *result.Result)) *result.Result {
	var res *result.Result

	for attempt := 1; attempt <= VoidRuns; attempt++ {
		res = run()
		if res == nil || !res.Voided {
			break
		}

		if note != nil {
			note(attempt, res)
		}
	}

	return res
}
