// Package compare sets a run against a baseline: per size (and QP count)
// the change of the headline figure, and a verdict that accounts for noise
// when both runs were repeated (--repeat).
package compare

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/rdmabench/rdmabench/results"
)

// Verdict is what a change means.
type Verdict string

const (
	Same        Verdict = "same"        // inside the noise (repeats) or the threshold
	Regression  Verdict = "regression"  // worse, outside the noise or the threshold
	Improvement Verdict = "improvement" // better, outside the noise or the threshold
	OnlyBase    Verdict = "only in base"
	OnlyNew     Verdict = "only in new"
)

// Metric is a headline figure compared.
type Metric string

const (
	Bandwidth Metric = "bw_avg_gbps"
	LatP50    Metric = "lat_p50_us"
	LatP99    Metric = "lat_p99_us"
)

// higherIsBetter is true for bandwidth, false for latency.
func (m Metric) higherIsBetter() bool { return m == Bandwidth }

func (m Metric) of(f results.Figures) float64 {
	switch m {
	case LatP50:
		return f.LatP50us
	case LatP99:
		return f.LatP99us
	}
	return f.BWAvgGbps
}

// Options tune the verdict.
type Options struct {
	// Threshold is the relative change (0.05: 5%) beyond which a change
	// counts when a side has no repeats to measure its noise by.
	Threshold float64
	// Confidence is the level of the interval of the difference of means
	// (0.95) when both sides have repeats.
	Confidence float64
}

func (o Options) checkThreshold() error {
	if o.Threshold <= 0 || o.Threshold >= 1 || math.IsNaN(o.Threshold) {
		return fmt.Errorf("threshold %g outside (0, 1)", o.Threshold)
	}
	return nil
}

// DefaultOptions are 5% and 95%.
var DefaultOptions = Options{Threshold: 0.05, Confidence: 0.95}

// Row is one size's (and QP count's) change of one metric.
type Row struct {
	Size   int     `json:"size"`
	QPs    int     `json:"qps"`
	Metric Metric  `json:"metric"`
	Base   float64 `json:"base"` // the mean over the base's repeats
	New    float64 `json:"new"`
	BaseN  int     `json:"base_n"` // values behind each mean
	NewN   int     `json:"new_n"`
	// DeltaPct is (new − base) / base in percent.
	DeltaPct float64 `json:"delta_pct"`
	// CILowPct and CIHighPct bound the difference of means (Welch), in
	// percent of the base; set when the verdict is noise-aware.
	CILowPct   *float64 `json:"ci_low_pct,omitempty"`
	CIHighPct  *float64 `json:"ci_high_pct,omitempty"`
	NoiseAware bool     `json:"noise_aware"`
	Verdict    Verdict  `json:"verdict"`
}

// Report is a whole comparison.
type Report struct {
	Test         results.Test `json:"test"`
	ThresholdPct float64      `json:"threshold_pct"`
	Confidence   float64      `json:"confidence"`
	Rows         []Row        `json:"rows"`
	Regressions  int          `json:"regressions"`
	// Notes say what differs between the runs besides the figures (device,
	// peer, transport, an error that cut a run short).
	Notes []string `json:"notes,omitempty"`
}

// Runs compares cur against base. Runs of different tests cannot be
// compared; sizes only one of them has are listed without a verdict.
func Runs(base, cur *results.Run, o Options) (*Report, error) {
	if err := o.checkThreshold(); err != nil {
		return nil, err
	}
	if !(o.Confidence > 0 && o.Confidence < 1) {
		return nil, fmt.Errorf("confidence %g outside (0, 1)", o.Confidence)
	}
	if base.Test != cur.Test {
		return nil, fmt.Errorf("the base ran %s and the new run %s: only runs of one test compare", base.Test, cur.Test)
	}
	rep := &Report{Test: base.Test, ThresholdPct: 100 * o.Threshold, Confidence: o.Confidence, Notes: differences(base, cur)}
	metrics := []Metric{Bandwidth}
	if base.Test.IsLatency() {
		metrics = []Metric{LatP50, LatP99}
	}
	type key struct{ size, qps int }
	newByKey := map[key]results.Result{}
	for _, r := range cur.Results {
		newByKey[key{r.Size, r.QPs}] = r
	}
	seen := map[key]bool{}
	common := 0
	for _, b := range base.Results {
		k := key{b.Size, b.QPs}
		seen[k] = true
		n, ok := newByKey[k]
		for _, m := range metrics {
			if !ok {
				rep.Rows = append(rep.Rows, Row{Size: b.Size, QPs: b.QPs, Metric: m, Base: mean(values(b, m)), BaseN: len(values(b, m)), Verdict: OnlyBase})
				continue
			}
			row := compareOne(b, n, m, o)
			if row.Verdict == Regression {
				rep.Regressions++
			}
			rep.Rows = append(rep.Rows, row)
		}
		if ok {
			common++
		}
	}
	for _, n := range cur.Results {
		if seen[key{n.Size, n.QPs}] {
			continue
		}
		for _, m := range metrics {
			rep.Rows = append(rep.Rows, Row{Size: n.Size, QPs: n.QPs, Metric: m, New: mean(values(n, m)), NewN: len(values(n, m)), Verdict: OnlyNew})
		}
	}
	if common == 0 {
		return rep, errors.New("the runs share no size and QP count: nothing to compare")
	}
	return rep, nil
}

// values are a result's figures of one metric: every repeat's, or the one.
func values(r results.Result, m Metric) []float64 {
	if len(r.Repeats) == 0 {
		return []float64{m.of(results.Headline(r))}
	}
	v := make([]float64, len(r.Repeats))
	for i, f := range r.Repeats {
		v[i] = m.of(f)
	}
	return v
}

func mean(v []float64) float64 { return stat.Mean(v, nil) }

// compareOne judges one metric of one size. With two or more values on
// each side the verdict is Welch's: the confidence interval of the
// difference of means (unequal variances, Welch–Satterthwaite degrees of
// freedom) must lie wholly on one side of zero. Otherwise the change must
// exceed the threshold.
func compareOne(b, n results.Result, m Metric, o Options) Row {
	bv, nv := values(b, m), values(n, m)
	row := Row{Size: b.Size, QPs: b.QPs, Metric: m, Base: mean(bv), New: mean(nv), BaseN: len(bv), NewN: len(nv), Verdict: Same}
	if row.Base <= 0 {
		return row // nothing to scale a change by (a size that moved nothing)
	}
	diff := row.New - row.Base
	row.DeltaPct = 100 * diff / row.Base
	lo, hi := diff, diff // without repeats: the change itself against the threshold
	if len(bv) >= 2 && len(nv) >= 2 {
		lo, hi = welchInterval(bv, nv, o.Confidence)
		l, h := 100*lo/row.Base, 100*hi/row.Base
		row.CILowPct, row.CIHighPct, row.NoiseAware = &l, &h, true
	} else {
		lo, hi = thresholdInterval(diff, row.Base, o.Threshold)
	}
	worse, better := hi < 0, lo > 0 // for bandwidth: the interval below or above zero
	if !m.higherIsBetter() {
		worse, better = better, worse
	}
	switch {
	case worse:
		row.Verdict = Regression
	case better:
		row.Verdict = Improvement
	}
	return row
}

// thresholdInterval maps a change to an interval that excludes zero only when
// the change exceeds the threshold, so one rule judges both cases.
func thresholdInterval(diff, base, threshold float64) (lo, hi float64) {
	if math.Abs(diff) <= threshold*base {
		return 0, 0
	}
	return diff, diff
}

// welchInterval is the confidence interval of mean(n) − mean(b) without
// assuming equal variances.
func welchInterval(b, n []float64, confidence float64) (lo, hi float64) {
	mb, vb := stat.MeanVariance(b, nil)
	mn, vn := stat.MeanVariance(n, nil)
	diff := mn - mb
	sb, sn := vb/float64(len(b)), vn/float64(len(n))
	se := math.Sqrt(sb + sn)
	if se == 0 {
		return diff, diff // no spread on either side: the difference is exact
	}
	df := (sb + sn) * (sb + sn) / (sb*sb/float64(len(b)-1) + sn*sn/float64(len(n)-1))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-confidence)/2)
	return diff - t*se, diff + t*se
}

// differences names what differs between the runs besides the figures.
func differences(base, cur *results.Run) []string {
	var notes []string
	diff := func(what, a, b string) {
		if a != b {
			notes = append(notes, fmt.Sprintf("%s differs: base %s, new %s", what, orNone(a), orNone(b)))
		}
	}
	diff("device", base.Device, cur.Device)
	diff("peer", base.Peer, cur.Peer)
	diff("transport", string(base.Transport), string(cur.Transport))
	diff("mode", base.Mode, cur.Mode)
	diff("MTU", fmt.Sprint(base.MTU), fmt.Sprint(cur.MTU))
	// Where the bytes live moves bandwidth as much as the link does. A run
	// from before memory was recorded (nil) was on host memory somewhere:
	// it differs only from GPU memory.
	for _, m := range []struct {
		what string
		a, b *results.Memory
	}{{"memory", base.Memory, cur.Memory}, {"peer memory", base.PeerMemory, cur.PeerMemory}} {
		onGPU := func(x *results.Memory) bool { return x != nil && x.Kind == results.GPUMemory }
		if (m.a != nil && m.b != nil) || onGPU(m.a) || onGPU(m.b) {
			diff(m.what, m.a.String(), m.b.String())
		}
	}
	for _, r := range []struct {
		name string
		run  *results.Run
	}{{"base", base}, {"new", cur}} {
		if r.run.Error != "" {
			notes = append(notes, fmt.Sprintf("the %s run ended with an error: %s", r.name, r.run.Error))
		}
	}
	return notes
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// MeshRow is one direction's change of one metric between two meshes.
type MeshRow struct {
	From string `json:"from"` // the client's host, or its rank where hosts repeat
	To   string `json:"to"`
	Row
}

// MeshReport is a mesh set against a baseline mesh, direction by
// direction.
type MeshReport struct {
	ThresholdPct float64   `json:"threshold_pct"`
	Rows         []MeshRow `json:"rows"`
	Regressions  int       `json:"regressions"`
	Notes        []string  `json:"notes,omitempty"`
}

// Meshes compares each direction both meshes measured: write-bw and
// send-lat p50 and p99, against the threshold (a mesh measures each
// direction once: there are no repeats to tell noise by). Directions are
// matched by host names when each mesh's hosts are distinct (ranks may land
// on other nodes in another job), otherwise by rank.
func Meshes(base, cur *results.Mesh, o Options) (*MeshReport, error) {
	if err := o.checkThreshold(); err != nil {
		return nil, err
	}
	rep := &MeshReport{ThresholdPct: 100 * o.Threshold}
	if base.BWSize != cur.BWSize || base.LatSize != cur.LatSize {
		rep.Notes = append(rep.Notes, fmt.Sprintf("message sizes differ: base write-bw %d B, send-lat %d B; new %d B, %d B", base.BWSize, base.LatSize, cur.BWSize, cur.LatSize))
	}
	byHost := distinctHosts(base) && distinctHosts(cur)
	if !byHost {
		rep.Notes = append(rep.Notes, "directions matched by rank (a mesh has one host for several ranks)")
	}
	name := func(m *results.Mesh, r int) string {
		if byHost {
			return m.Ranks[r].Host
		}
		return fmt.Sprint(r)
	}
	type key struct{ from, to string }
	newByKey := map[key]results.MeshPair{}
	for _, p := range cur.Pairs {
		if p.Measured() {
			newByKey[key{name(cur, p.From), name(cur, p.To)}] = p
		}
	}
	asResult := func(p results.MeshPair) results.Result {
		return results.Result{QPs: 1, BWAvgGbps: p.BWGbps, Lat: &results.LatencyStats{P50: p.LatP50us, P99: p.LatP99us}}
	}
	for _, b := range base.Pairs {
		k := key{name(base, b.From), name(base, b.To)}
		n, ok := newByKey[k]
		if !b.Measured() || !ok {
			continue
		}
		for _, m := range []Metric{Bandwidth, LatP50, LatP99} {
			row := compareOne(asResult(b), asResult(n), m, o)
			if row.Verdict == Regression {
				rep.Regressions++
			}
			rep.Rows = append(rep.Rows, MeshRow{From: k.from, To: k.to, Row: row})
		}
		delete(newByKey, k)
	}
	if len(rep.Rows) == 0 {
		return rep, errors.New("the meshes share no measured direction: nothing to compare")
	}
	if len(newByKey) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d directions measured only in the new mesh", len(newByKey)))
	}
	return rep, nil
}

func distinctHosts(m *results.Mesh) bool {
	seen := map[string]bool{}
	for _, r := range m.Ranks {
		if r.Host == "" || seen[r.Host] {
			return false
		}
		seen[r.Host] = true
	}
	return true
}
