package engine

import (
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rdmabench/rdmabench/results"
)

// Histogram range: 1 ns to 1 hour at 3 significant figures.
const (
	histMinNS   = 1
	histMaxNS   = 3600 * 1e9
	histSigFigs = 3
)

// LatencyRecorder accumulates samples of one thread: an HDR histogram for
// percentiles, and exact min, max, mean and standard deviation (Welford), so
// that t_max is the true maximum and stdev is not rounded to a bucket.
type LatencyRecorder struct {
	Hist  *hdrhistogram.Histogram
	count uint64
	min   int64
	max   int64
	mean  float64
	m2    float64
}

// NewLatencyRecorder makes an empty recorder.
func NewLatencyRecorder() *LatencyRecorder {
	return &LatencyRecorder{Hist: hdrhistogram.New(histMinNS, histMaxNS, histSigFigs), min: math.MaxInt64}
}

// Record adds one sample in nanoseconds.
func (r *LatencyRecorder) Record(ns int64) {
	if ns < histMinNS {
		ns = histMinNS
	}
	_ = r.Hist.RecordValue(min(ns, int64(histMaxNS)))
	r.count++
	r.min = min(r.min, ns)
	r.max = max(r.max, ns)
	d := float64(ns) - r.mean
	r.mean += d / float64(r.count)
	r.m2 += d * (float64(ns) - r.mean)
}

// Merge folds another recorder (another thread's) into this one.
func (r *LatencyRecorder) Merge(o *LatencyRecorder) {
	if o.count == 0 {
		return
	}
	r.Hist.Merge(o.Hist)
	n := r.count + o.count
	d := o.mean - r.mean
	r.mean += d * float64(o.count) / float64(n)
	r.m2 += o.m2 + d*d*float64(r.count)*float64(o.count)/float64(n)
	r.count = n
	r.min = min(r.min, o.min)
	r.max = max(r.max, o.max)
}

// Count is the number of samples recorded.
func (r *LatencyRecorder) Count() uint64 { return r.count }

// Stats summarises the samples. Percentiles come from the histogram
// (hdrhistogram-go takes 0–100); min, max, mean and stdev are exact.
func (r *LatencyRecorder) Stats() results.LatencyStats {
	if r.count == 0 {
		return results.LatencyStats{}
	}
	us := func(ns float64) float64 { return ns / 1e3 }
	q := func(p float64) float64 { return us(float64(r.Hist.ValueAtQuantile(p))) }
	sd := 0.0
	if r.count > 1 {
		sd = math.Sqrt(r.m2 / float64(r.count-1))
	}
	return results.LatencyStats{
		Min: us(float64(r.min)), Max: us(float64(r.max)), Mean: us(r.mean), Stdev: us(sd),
		P50: q(50), P90: q(90), P99: q(99), P99_9: q(99.9), P99_99: q(99.99),
	}
}
