package compare

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Verdict is what a row's change means.
type Verdict int

const (
	// Same: the change is shown to lie within the threshold (the whole
	// interval inside ±threshold), or, without repeats, it is within it.
	Same Verdict = iota
	// Regression: worse, the interval wholly on the worse side of zero and
	// the change itself beyond the threshold (or, without repeats, beyond
	// the threshold).
	Regression
	// Improvement: the mirror of Regression.
	Improvement
	// Inconclusive: neither shown within the threshold nor shown beyond
	// zero by more than it; more repeats would settle it.
	Inconclusive
	// Missing: measured in the base, not in the new run (absent, failed, no
	// figure). A regression unless Options.AllowMissing.
	Missing
	// OnlyNew: measured in the new run only.
	OnlyNew
)

var verdictNames = []string{"same", "regression", "improvement", "inconclusive", "missing", "only in new"}

func (v Verdict) String() string { return enumString(verdictNames, v, "Verdict") }

// MarshalText writes the verdict's name, which is what JSON readers see.
func (v Verdict) MarshalText() ([]byte, error) { return enumMarshal(verdictNames, v, "verdict") }

// UnmarshalText reads a verdict's name.
func (v *Verdict) UnmarshalText(b []byte) error { return enumUnmarshal(verdictNames, v, b, "verdict") }

// Noise says where a row's spread came from.
type Noise int

const (
	// NoNoise: a single value on each side; the threshold alone judges.
	NoNoise Noise = iota
	// BothSides: repeats on both sides (Welch).
	BothSides
	// BaseOnly and NewOnly: repeats on one side, whose relative spread is
	// taken for the other's single value too.
	BaseOnly
	NewOnly
	// AcrossDirections: a mesh's spread of the change over all its
	// directions (each measured once).
	AcrossDirections
)

var noiseNames = []string{"none", "both sides", "base only", "new only", "across directions"}

func (n Noise) String() string { return enumString(noiseNames, n, "Noise") }

// MarshalText writes the name.
func (n Noise) MarshalText() ([]byte, error) { return enumMarshal(noiseNames, n, "noise") }

// UnmarshalText reads a name.
func (n *Noise) UnmarshalText(b []byte) error { return enumUnmarshal(noiseNames, n, b, "noise") }

// enumString, enumMarshal and enumUnmarshal name the values of an int
// enum by a table of names, in order.
func enumString[T ~int](names []string, v T, typ string) string {
	if v < 0 || int(v) >= len(names) {
		return fmt.Sprintf("%s(%d)", typ, int(v))
	}
	return names[v]
}

func enumMarshal[T ~int](names []string, v T, kind string) ([]byte, error) {
	if v < 0 || int(v) >= len(names) {
		return nil, fmt.Errorf("%s %d unknown", kind, int(v))
	}
	return []byte(names[v]), nil
}

func enumUnmarshal[T ~int](names []string, v *T, b []byte, kind string) error {
	for i, n := range names {
		if n == string(b) {
			*v = T(i)
			return nil
		}
	}
	return fmt.Errorf("%s %q unknown", kind, b)
}

// Resolution is the smallest relative spread a side is taken to have. The
// latency figures come from HDR histograms kept to 3 significant digits
// (about 0.1%), and repeats that agree to the last digit say only that the
// noise is below that: without a floor, {1.500 ×3} against {1.501 ×3}
// would have no spread, and any change would be "certain".
const Resolution = 0.001

// MaxRepeats bounds the repeats an inconclusive row is told would settle
// it: what --repeat accepts.
const MaxRepeats = 1000

// interval is a change in fractions of the base: the change of the means
// and its bounds, each a one-sided bound at 1 − α/family (Bonferroni), so
// the pair is a (1 − 2α/family) interval.
type interval struct {
	change, lo, hi float64
}

// side is one side's values of a metric.
type side struct {
	n          int
	mean, vari float64 // the variance of one value, floored
}

func mean(v []float64) float64 { return stat.Mean(v, nil) }

func sideOf(v []float64) side {
	m, s2 := mean(v), 0.0
	if len(v) > 1 {
		_, s2 = stat.MeanVariance(v, nil)
	}
	return side{n: len(v), mean: m, vari: math.Max(s2, floorVariance(m))}
}

func floorVariance(mean float64) float64 { return (Resolution * mean) * (Resolution * mean) }

// exactDF is the most degrees of freedom studentQ asks gonum about.
// StudentsT.Quantile (gonum 0.17) goes wrong far out in the tail at large
// df: at 1 − 1.7e-8, a mesh's Bonferroni level, it gives 81.7 at 1e5 df
// and 258 at 1e6 where the answer is about 5.52. Beyond exactDF the
// Cornish–Fisher expansion about the normal quantile (Abramowitz and
// Stegun 26.7.5) is exact to well under 1e-4 at any p used here.
const exactDF = 1000

// studentQ is Student's t quantile of p at df degrees of freedom.
func studentQ(p, df float64) float64 {
	if df <= exactDF {
		return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(p)
	}
	z := distuv.UnitNormal.Quantile(p)
	z2 := z * z
	return z + z*(z2+1)/(4*df) + z*((5*z2+16)*z2+3)/(96*df*df)
}

// welch is the interval of mean(n) − mean(b), in fractions of mean(b), at
// the one-sided level 1 − a for each bound: unequal variances, Welch–
// Satterthwaite degrees of freedom. With one value on a side, that side
// borrows the other's relative spread (the same noise assumed) and the
// degrees of freedom are the repeated side's n − 1.
func welch(b, n side, a float64) (interval, Noise) {
	diff := n.mean - b.mean
	noise := BothSides
	vb, vn := b.vari, n.vari
	var df float64
	switch {
	case b.n >= 2 && n.n >= 2:
		sb, sn := vb/float64(b.n), vn/float64(n.n)
		df = (sb + sn) * (sb + sn) / (sb*sb/float64(b.n-1) + sn*sn/float64(n.n-1))
	case b.n >= 2:
		noise, df = BaseOnly, float64(b.n-1)
		vn = math.Max(vb/(b.mean*b.mean)*n.mean*n.mean, floorVariance(n.mean))
	default:
		noise, df = NewOnly, float64(n.n-1)
		vb = math.Max(vn/(n.mean*n.mean)*b.mean*b.mean, floorVariance(b.mean))
	}
	se := math.Sqrt(vb/float64(b.n) + vn/float64(n.n))
	h := studentQ(1-a, df) * se
	return interval{change: diff / b.mean, lo: (diff - h) / b.mean, hi: (diff + h) / b.mean}, noise
}

// judge turns an interval into a verdict against the threshold. good is
// the sign of a better change (+1 for bandwidth, −1 for latency). The
// threshold always applies: a change shown to be real but smaller than
// the threshold is not a regression.
func judge(iv interval, good, threshold float64) Verdict {
	g, lo, hi := good*iv.change, good*iv.lo, good*iv.hi
	if lo > hi {
		lo, hi = hi, lo
	}
	switch {
	case hi < 0 && g <= -threshold:
		return Regression
	case lo > 0 && g >= threshold:
		return Improvement
	case lo > -threshold && hi < threshold:
		return Same
	}
	return Inconclusive
}

// judgeThreshold is the verdict of a change without noise to judge it by.
func judgeThreshold(change, good, threshold float64) Verdict {
	switch g := good * change; {
	case g <= -threshold:
		return Regression
	case g >= threshold:
		return Improvement
	}
	return Same
}

// settleRepeats estimates how many repeats a side would settle an
// inconclusive row, the spreads and the change staying what they are:
// enough that the interval's half-width fits between the change and the
// threshold (to show it within), or between the change and zero (to show
// it beyond). 0 when more than MaxRepeats would be needed.
func settleRepeats(b, n side, iv interval, threshold, a float64) int {
	c := math.Abs(iv.change)
	room := c
	if c < threshold {
		room = threshold - c
	}
	if room <= 0 {
		return 0
	}
	// k repeats a side settle it when q(k)·√(s²/k) < room, s² the two
	// relative variances together and q(k) the quantile at k's Welch
	// degrees of freedom. q shrinks as k grows, toward the normal one:
	// start from the normal's k and step to the k that the last one's
	// quantile asks for. That may pass the least such k by a little, which
	// an estimate of repeats can afford.
	vb, vn := b.vari/(b.mean*b.mean), n.vari/(b.mean*b.mean)
	s2 := vb + vn
	need := func(q float64) int { return max(2, int(math.Floor(s2*q*q/(room*room)))+1) }
	k := need(-distuv.UnitNormal.Quantile(a))
	for range 10 {
		if k > MaxRepeats {
			return 0
		}
		next := need(studentQ(1-a, float64(k-1)*s2*s2/(vb*vb+vn*vn)))
		if next <= k {
			return k
		}
		k = next
	}
	return k
}
