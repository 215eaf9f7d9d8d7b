// Package stats is the reliability arithmetic behind running one scenario over
// many seeds: a pass rate with a confidence interval, duration percentiles,
// runs grouped by outcome, and a nightly ledger compared with the previous
// night's by a significance test. A flaky bootstrap shows up as "19 of 20"
// one night and "17 of 20" the next; the point of this package is to say, with
// a number, whether that is noise or something got worse.
//
// The statistics are hand-rolled on purpose. Only two are needed, both are a
// few lines, and no small, well-kept Go library provides an exact Fisher test
// and a Wilson interval without pulling in a whole numerics stack:
//
//   - Wilson, E. B. (1927). "Probable inference, the law of succession, and
//     statistical inference". JASA 22(158): 209-212. The score interval stays
//     inside [0, 1] and behaves at 0/n and n/n, where the textbook normal
//     interval collapses to a width of zero.
//   - Fisher's exact test (Fisher 1922; 1935): with the margins of the 2x2
//     table fixed, the passes in one row follow the hypergeometric
//     distribution, and the p-value is the exact sum of its tail. Exact
//     matters here: nightly samples are small (tens of runs), where the
//     chi-squared approximation is unreliable.
package stats

import (
	"math"
	"slices"
	"time"
)

// z95 is the two-sided 95 % standard normal quantile, Φ⁻¹(0.975).
const z95 = 1.959963984540054

// Wilson returns the Wilson score 95 % interval for a binomial proportion
// with successes out of n. It is used rather than p ± z·SE because the pass
// rates of interest sit at or near 100 %, where the normal interval claims a
// certainty that 20 runs cannot give.
//
// n == 0 returns (0, 1): nothing is known. Invalid input (a negative count or
// successes > n) also returns (0, 1) rather than panicking, so one bad sample
// cannot take down a nightly report.
func Wilson(successes, n int) (lo, hi float64) {
	if n <= 0 || successes < 0 || successes > n {
		return 0, 1
	}

	fn := float64(n)
	p := float64(successes) / fn
	z2 := z95 * z95
	den := 1 + z2/fn
	center := (p + z2/(2*fn)) / den
	half := z95 / den * math.Sqrt(p*(1-p)/fn+z2/(4*fn*fn))

	lo = max(0, center-half)
	hi = min(1, center+half)

	// At 0/n and n/n the bound is exactly 0 or 1 algebraically; pin it so
	// rounding cannot report 0.9999999999999999 for an all-pass sample.
	if successes == 0 {
		lo = 0
	}

	if successes == n {
		hi = 1
	}

	return lo, hi
}

// FisherLess is the one-sided Fisher exact test p-value for the alternative
// "the current pass rate is lower than the baseline's". The table is
//
//	baseline: basePass  baseN-basePass
//	current:  curPass   curN-curPass
//
// and the result is P(X <= curPass), X being the passes in the current row
// under the hypergeometric distribution with all margins fixed. A small value
// means a drop this large is unlikely to be bad luck.
//
// Preconditions: every count >= 0, basePass <= baseN, curPass <= curN. Input
// that breaks them returns 1 ("no evidence"), never a panic, so bad data can
// never raise a false regression.
func FisherLess(basePass, baseN, curPass, curN int) float64 {
	return fisherTail(basePass, baseN, curPass, curN, true)
}

// FisherGreater is FisherLess for the opposite alternative, "the current pass
// rate is higher than the baseline's": P(X >= curPass). It is what lets a
// nightly report say a fix worked. Same preconditions, same return of 1 for
// invalid input.
func FisherGreater(basePass, baseN, curPass, curN int) float64 {
	return fisherTail(basePass, baseN, curPass, curN, false)
}

// MaxRuns bounds every count the tests take: a scenario's runs in one night
// or hunt. Counts above it are not evidence of anything (the Fisher tests
// return 1 for them, as for any invalid input) and a ledger holding one is
// refused when it is read.
const MaxRuns = 1_000_000

// fisherTail sums one tail of the hypergeometric distribution of X, the
// passes among the curN draws of the current row, out of N = baseN+curN runs
// of which K passed in total.
//
// The distribution is unimodal, so the tail is summed from its end nearest
// the mode outwards, each term from the last by the ratio of consecutive
// terms, until the terms no longer change the sum; a tail that holds the
// mode is one minus the other tail. Only the first term is computed in log
// space (log-factorials: a thousand-run night does not overflow), and the
// work is a few standard deviations of X whatever the counts, so comparing
// ledgers stays instant at MaxRuns.
func fisherTail(basePass, baseN, curPass, curN int, lower bool) float64 {
	if basePass < 0 || curPass < 0 || basePass > baseN || curPass > curN || baseN > MaxRuns || curN > MaxRuns {
		return 1
	}

	k := basePass + curPass
	lo := max(0, k-baseN) // X's support is [lo, hi]
	hi := min(curN, k)

	from, to := lo, curPass
	if !lower {
		from, to = curPass, hi
	}

	// The tail covering the whole support is exactly 1; returning it
	// directly avoids a rounding 0.9999999999999998 for, say, 20/20 vs 20/20.
	if from <= lo && to >= hi {
		return 1
	}

	h := hypergeometric{n: curN, b: baseN, k: k, lo: lo, hi: hi}
	mode := min(max((curN+1)*(k+1)/(baseN+curN+2), lo), hi)

	var p float64

	switch {
	case lower && curPass <= mode:
		p = h.sumDown(curPass)
	case lower:
		p = 1 - h.sumUp(curPass+1)
	case curPass >= mode:
		p = h.sumUp(curPass)
	default:
		p = 1 - h.sumDown(curPass-1)
	}

	return min(1, max(0, p))
}

// hypergeometric is the distribution of the passes among n draws from b+n
// runs of which k passed; X's support is [lo, hi].
type hypergeometric struct{ n, b, k, lo, hi int }

// pmf is P(X = x), for x in the support.
func (h hypergeometric) pmf(x int) float64 {
	return math.Exp(logChoose(h.n, x) + logChoose(h.b, h.k-x) - logChoose(h.n+h.b, h.k))
}

// negligible is how small a term is, relative to the sum so far, for the
// rest of a tail (whose terms only shrink, ever faster) not to matter.
const negligible = 1e-18

// sumDown is P(X <= from), from at or below the mode.
func (h hypergeometric) sumDown(from int) float64 {
	var sum float64

	term := h.pmf(from)

	for x := from; x >= h.lo; x-- {
		sum += term
		if term <= sum*negligible {
			break
		}

		// P(X = x-1) / P(X = x)
		term *= float64(x) / float64(h.n-x+1) * float64(h.b-h.k+x) / float64(h.k-x+1)
	}

	return sum
}

// sumUp is P(X >= from), from at or above the mode.
func (h hypergeometric) sumUp(from int) float64 {
	var sum float64

	term := h.pmf(from)

	for x := from; x <= h.hi; x++ {
		sum += term
		if term <= sum*negligible {
			break
		}

		// P(X = x+1) / P(X = x)
		term *= float64(h.n-x) / float64(x+1) * float64(h.k-x) / float64(h.b-h.k+x+1)
	}

	return sum
}

// logChoose is ln C(n, k) for 0 <= k <= n.
func logChoose(n, k int) float64 {
	return logFactorial(n) - logFactorial(k) - logFactorial(n-k)
}

// logFactorial is ln n!, via ln Γ(n+1).
func logFactorial(n int) float64 {
	v, _ := math.Lgamma(float64(n) + 1)

	return v
}

// Percentile returns the nearest-rank p-th percentile of ds: the smallest
// value with at least p % of the sample at or below it. Nearest rank is used
// because it always returns a duration that was actually observed, which is
// what a reader of "p95 = 41s" expects.
//
// p should be in (0, 100]; smaller p returns the minimum and larger p the
// maximum. An empty sample returns 0. ds is not modified.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}

	sorted := slices.Clone(ds)
	slices.Sort(sorted)

	switch {
	case !(p > 0): // also catches NaN
		return sorted[0]
	case p >= 100:
		return sorted[len(sorted)-1]
	}

	// p·n first: for whole-number p it is exact, so p7 of 100 runs is rank
	// 7, not 8 by way of 0.07·100 = 7.000000000000001.
	rank := int(math.Ceil(p * float64(len(sorted)) / 100))

	return sorted[max(rank, 1)-1]
}
