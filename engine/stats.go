package engine

import (
	"io"
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
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

// LatencyStats are the figures of a latency result, in microseconds.
type LatencyStats struct {
	Min    float64 `json:"min"`
	P50    float64 `json:"p50"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	P99_9  float64 `json:"p99_9"`
	P99_99 float64 `json:"p99_99"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
	Stdev  float64 `json:"stdev"`
}

// Stats summarises the samples. Percentiles come from the histogram
// (hdrhistogram-go takes 0–100); min, max, mean and stdev are exact.
func (r *LatencyRecorder) Stats() LatencyStats {
	if r.count == 0 {
		return LatencyStats{}
	}
	us := func(ns float64) float64 { return ns / 1e3 }
	q := func(p float64) float64 { return us(float64(r.Hist.ValueAtQuantile(p))) }
	sd := 0.0
	if r.count > 1 {
		sd = math.Sqrt(r.m2 / float64(r.count-1))
	}
	return LatencyStats{
		Min: us(float64(r.min)), Max: us(float64(r.max)), Mean: us(r.mean), Stdev: us(sd),
		P50: q(50), P90: q(90), P99: q(99), P99_9: q(99.9), P99_99: q(99.99),
	}
}

// WriteHgrm writes the HdrHistogram percentile distribution (.hgrm) with
// values in microseconds, the format HdrHistogram's plotter reads.
func WriteHgrm(w io.Writer, h *hdrhistogram.Histogram) error {
	_, err := h.PercentilesPrint(w, 5, 1e3)
	return err
}
