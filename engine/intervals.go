package engine

import (
	"time"

	"github.com/rdmabench/rdmabench/csrc"
	"github.com/rdmabench/rdmabench/results"
)

// intervalReporter samples the loops' progress counter every interval and
// hands each interval to the observer as it closes.
type intervalReporter struct {
	done     chan struct{}
	finished chan []results.Interval
}

// startIntervals starts reporting; with no interval it does nothing. A
// timed run (-D) has at most limit intervals, ceil(duration / interval):
// the reporter starts before the loops and the loops drain their last
// window after the duration, so on a slow target (rxe under TCG) the
// start line and the drain once made -D 2 --interval 0.5 report five.
// limit 0: no limit (an iteration run's length is not known).
func startIntervals(every time.Duration, limit int, size int, progress *csrc.Counter, obs Observer) *intervalReporter {
	r := &intervalReporter{done: make(chan struct{}), finished: make(chan []results.Interval, 1)}
	if every <= 0 {
		r.finished <- nil
		return r
	}
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		var last uint64
		var out []results.Interval
		t0 := time.Now()
		prev := t0
		// emit closes the interval ending at this reading of the counter.
		// Its figure is over the time that really passed between readings:
		// a tick's time is when it was due, and on CPUs busy with polling
		// loops (or behind a slow observer) the reading comes later.
		emit := func() {
			if limit > 0 && len(out) >= limit {
				return
			}
			n := progress.Load()
			now := time.Now()
			iv := results.Interval{
				StartS: prev.Sub(t0).Seconds(), EndS: now.Sub(t0).Seconds(),
				Messages: n - last, Bytes: (n - last) * uint64(size),
			}
			if d := now.Sub(prev).Seconds(); d > 0 {
				iv.Gbps = float64(iv.Bytes) * 8 / d / 1e9
			}
			last, prev = n, now
			out = append(out, iv)
			if obs != nil {
				obs.Interval(size, iv)
			}
		}
		for {
			select {
			case <-r.done:
				// A tick that came due with the end is still an interval.
				select {
				case <-tick.C:
					emit()
				default:
				}
				// The run's end rarely falls on a tick (the loops drain
				// their last window after it): the partial interval counts
				// when it is at least half an interval.
				if time.Since(prev) >= every/2 {
					emit()
				}
				r.finished <- out
				return
			case <-tick.C:
				emit()
			}
		}
	}()
	return r
}

// intervalLimit is how many intervals a run of this plan reports at most.
func intervalLimit(p Plan) int {
	if p.Duration <= 0 || p.Interval <= 0 {
		return 0
	}
	return int((p.Duration + p.Interval - 1) / p.Interval)
}

// stop ends reporting and returns the complete intervals.
func (r *intervalReporter) stop() []results.Interval {
	close(r.done)
	return <-r.finished
}
