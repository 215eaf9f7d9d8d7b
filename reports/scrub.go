package reports

import "github.com/talchaos/talchaos/harness/result"

// clean is what a writer renders instead of r: a copy of r with every string
// scrubbed (result.ScrubKeyMaterial: key material, credentials in URLs and
// HTTP headers). A run's result is scrubbed already, with the secrets it
// knows; this is for every other way a result reaches a report (an error
// before the run, a report read back, a caller's own result), so that no
// writer of this package puts a credential in a file or on a terminal. r is
// not modified.
func clean(r *result.Result) *result.Result {
	return (*result.Scrubber)(nil).ScrubbedResult(r)
}

// cleanHunt is clean for a hunt.
func cleanHunt(h *Hunt) *Hunt {
	return result.Scrubbed[*Hunt](nil, h)
}
