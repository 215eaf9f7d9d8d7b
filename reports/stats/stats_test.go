package stats

import (
	"math"
	"math/big"
	"slices"
	"testing"
	"time"
)

func TestWilson(t *testing.T) {
	// Expected bounds computed independently in Python from Wilson's formula.
	tests := []struct {
		s, n   int
		lo, hi float64
	}{
		{10, 20, 0.2992980081982123, 0.7007019918017877},
		{20, 20, 0.8388748419471806, 1},
		{0, 20, 0, 0.16112515805281938},
		{95, 100, 0.8882495307680808, 0.9784563208456319},
		{1, 1, 0.20654931437723745, 1},
		{0, 0, 0, 1},
		{-1, 5, 0, 1}, // invalid: no knowledge, no panic
		{6, 5, 0, 1},
		{0, -1, 0, 1},
	}
	for _, tt := range tests {
		lo, hi := Wilson(tt.s, tt.n)
		if math.Abs(lo-tt.lo) > 1e-12 || math.Abs(hi-tt.hi) > 1e-12 {
			t.Errorf("Wilson(%d, %d) = (%.16g, %.16g), want (%.16g, %.16g)", tt.s, tt.n, lo, hi, tt.lo, tt.hi)
		}
	}

	// The figures quoted in reports, to four places.
	if lo, hi := Wilson(10, 20); math.Round(lo*1e4) != 2993 || math.Round(hi*1e4) != 7007 {
		t.Errorf("Wilson(10, 20) = (%.4f, %.4f), want (0.2993, 0.7007)", lo, hi)
	}

	if lo, hi := Wilson(20, 20); math.Round(lo*1e4) != 8389 || hi != 1 {
		t.Errorf("Wilson(20, 20) = (%.4f, %v), want (0.8389, 1)", lo, hi)
	}
}

func TestFisher(t *testing.T) {
	// Exact values from Python's fractions and math.comb: 1/4588 is
	// C(20,10)·C(20,20)/C(40,30); 300666623/481980870 is (1+C(20,10)²/C(40,20))/2.
	tests := []struct {
		name                       string
		basePass, baseN, cur, curN int
		less, greater              float64
	}{
		{"20/20 to 10/20", 20, 20, 10, 20, 1.0 / 4588, 1},
		{"10/20 to 20/20", 10, 20, 20, 20, 1, 1.0 / 4588},
		{"10/20 to 10/20", 10, 20, 10, 20, 300666623.0 / 481980870, 300666623.0 / 481980870},
		{"20/20 to 20/20", 20, 20, 20, 20, 1, 1},
		{"20/20 to 19/20", 20, 20, 19, 20, 0.5, 1},
		{"19/20 to 20/20", 19, 20, 20, 20, 1, 0.5},
		{"5/10 to 0/10", 5, 10, 0, 10, 21.0 / 1292, 1},
		{"0/20 to 0/20", 0, 20, 0, 20, 1, 1},
		{"no baseline", 0, 0, 3, 7, 1, 1},
		{"no current", 3, 7, 0, 0, 1, 1},
		{"negative", -1, 20, 10, 20, 1, 1},
		{"pass > n", 21, 20, 10, 20, 1, 1},
		{"current pass > n", 20, 20, 21, 20, 1, 1},
		{"negative n", 0, -1, 0, 20, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FisherLess(tt.basePass, tt.baseN, tt.cur, tt.curN); !closeRel(got, tt.less, 1e-12) {
				t.Errorf("FisherLess = %.17g, want %.17g", got, tt.less)
			}

			if got := FisherGreater(tt.basePass, tt.baseN, tt.cur, tt.curN); !closeRel(got, tt.greater, 1e-12) {
				t.Errorf("FisherGreater = %.17g, want %.17g", got, tt.greater)
			}
		})
	}

	// A tail that covers the whole support is exactly 1, not 1 - ε.
	if got := FisherLess(20, 20, 20, 20); got != 1 {
		t.Errorf("FisherLess(20, 20, 20, 20) = %.17g, want exactly 1", got)
	}
}

// TestFisherExhaustive checks every small table against an exact rational
// computation of the hypergeometric tails, and the symmetries that must hold.
func TestFisherExhaustive(t *testing.T) {
	const maxN = 8
	for n := 0; n <= maxN; n++ {
		for a := 0; a <= n; a++ {
			for m := 0; m <= maxN; m++ {
				for c := 0; c <= m; c++ {
					less, greater := exactTails(a, n, c, m)

					if got := FisherLess(a, n, c, m); !closeRel(got, less, 1e-12) {
						t.Fatalf("FisherLess(%d, %d, %d, %d) = %.17g, want %.17g", a, n, c, m, got, less)
					}

					if got := FisherGreater(a, n, c, m); !closeRel(got, greater, 1e-12) {
						t.Fatalf("FisherGreater(%d, %d, %d, %d) = %.17g, want %.17g", a, n, c, m, got, greater)
					}

					// Swapping the rows turns "current lower" into "baseline higher".
					if l, g := FisherLess(a, n, c, m), FisherGreater(c, m, a, n); !closeRel(l, g, 1e-12) {
						t.Fatalf("FisherLess(%d, %d, %d, %d) = %.17g but row-swapped FisherGreater = %.17g", a, n, c, m, l, g)
					}
				}
			}
		}
	}
}

// exactTails is the reference: P(X <= c) and P(X >= c) as exact rationals,
// X ~ Hypergeometric(N = n+m, K = a+c, draws = m), rounded to float64 once.
func exactTails(a, n, c, m int) (less, greater float64) {
	k := a + c
	total := new(big.Int).Binomial(int64(n+m), int64(k))
	lessSum, greaterSum := new(big.Int), new(big.Int)

	for x := max(0, k-n); x <= min(m, k); x++ {
		term := new(big.Int).Binomial(int64(m), int64(x))
		term.Mul(term, new(big.Int).Binomial(int64(n), int64(k-x)))

		if x <= c {
			lessSum.Add(lessSum, term)
		}

		if x >= c {
			greaterSum.Add(greaterSum, term)
		}
	}

	less, _ = new(big.Rat).SetFrac(lessSum, total).Float64()
	greater, _ = new(big.Rat).SetFrac(greaterSum, total).Float64()

	return less, greater
}

func closeRel(got, want, tol float64) bool {
	return got == want || math.Abs(got-want) <= tol*math.Abs(want)
}

func TestPercentile(t *testing.T) {
	var oneToTen []time.Duration
	for i := 10; i >= 1; i-- { // unsorted on purpose
		oneToTen = append(oneToTen, time.Duration(i)*time.Millisecond)
	}

	input := slices.Clone(oneToTen)

	tests := []struct {
		name string
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{"p50 of 1..10", oneToTen, 50, 5 * time.Millisecond},
		{"p95 of 1..10", oneToTen, 95, 10 * time.Millisecond},
		{"p10 of 1..10", oneToTen, 10, 1 * time.Millisecond},
		{"p51 of 1..10", oneToTen, 51, 6 * time.Millisecond},
		{"p100 of 1..10", oneToTen, 100, 10 * time.Millisecond},
		{"p0 clamps to min", oneToTen, 0, 1 * time.Millisecond},
		{"NaN clamps to min", oneToTen, math.NaN(), 1 * time.Millisecond},
		{"p200 clamps to max", oneToTen, 200, 10 * time.Millisecond},
		{"single", []time.Duration{7 * time.Second}, 50, 7 * time.Second},
		{"empty", nil, 50, 0},
	}
	for _, tt := range tests {
		if got := Percentile(tt.ds, tt.p); got != tt.want {
			t.Errorf("%s: Percentile(p=%v) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}

	if !slices.Equal(oneToTen, input) {
		t.Errorf("Percentile modified its input: %v", oneToTen)
	}

	// p·n is rank 7 exactly; 0.07·100 would round up to rank 8.
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, time.Duration(i))
	}

	if got := Percentile(hundred, 7); got != 7 {
		t.Errorf("Percentile(1..100, 7) = %v, want 7", got)
	}
}

// TestFisherLarge checks tables of hundreds of runs against the exact
// rational tails, and that the tests stay cheap at MaxRuns and return 1
// beyond it.
func TestFisherLarge(t *testing.T) {
	for _, tt := range [][4]int{
		{300, 300, 290, 300}, {150, 300, 120, 300}, {499, 500, 450, 500}, {10, 500, 0, 7}, {1, 400, 399, 400}, {250, 500, 250, 500},
	} {
		a, n, c, m := tt[0], tt[1], tt[2], tt[3]
		less, greater := exactTails(a, n, c, m)

		if got := FisherLess(a, n, c, m); !closeRel(got, less, 1e-10) {
			t.Errorf("FisherLess(%d, %d, %d, %d) = %.17g, want %.17g", a, n, c, m, got, less)
		}

		if got := FisherGreater(a, n, c, m); !closeRel(got, greater, 1e-10) {
			t.Errorf("FisherGreater(%d, %d, %d, %d) = %.17g, want %.17g", a, n, c, m, got, greater)
		}
	}

	start := time.Now()

	for _, tt := range [][4]int{
		{MaxRuns, MaxRuns, 0, MaxRuns}, {MaxRuns / 2, MaxRuns, MaxRuns / 2, MaxRuns}, {MaxRuns / 2, MaxRuns, MaxRuns/2 - 2000, MaxRuns},
		{MaxRuns / 2, MaxRuns, MaxRuns/2 + 2000, MaxRuns}, {1, MaxRuns, MaxRuns - 1, MaxRuns},
	} {
		l, g := FisherLess(tt[0], tt[1], tt[2], tt[3]), FisherGreater(tt[0], tt[1], tt[2], tt[3])
		if !(l >= 0 && l <= 1 && g >= 0 && g <= 1) {
			t.Errorf("Fisher%v = %v, %v", tt, l, g)
		}
	}

	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("five tables at MaxRuns took %s", d)
	}

	// Half of a million runs passed, then 0.2 % fewer: z = 0.002/sqrt(2·0.25/10⁶)
	// = 2.83, one-sided p = 0.00233 by the normal approximation.
	if p := FisherLess(MaxRuns/2, MaxRuns, MaxRuns/2-2000, MaxRuns); !closeRel(p, 0.00233, 0.01) {
		t.Errorf("a 0.2 %% drop over a million runs each: p = %v, want about 0.00233", p)
	}

	for _, tt := range [][4]int{{20, MaxRuns + 1, 0, 20}, {20, 20, 0, math.MaxInt}, {math.MaxInt, math.MaxInt, 0, math.MaxInt}} {
		if l, g := FisherLess(tt[0], tt[1], tt[2], tt[3]), FisherGreater(tt[0], tt[1], tt[2], tt[3]); l != 1 || g != 1 {
			t.Errorf("Fisher%v beyond MaxRuns = %v, %v, want 1, 1", tt, l, g)
		}
	}
}
