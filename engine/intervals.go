package engine

import (
	"fmt"
	"io"
	"time"

	"github.com/rdmabench/rdmabench/csrc"
)

// Interval is one --interval report of a bandwidth run.
type Interval struct {
	StartS   float64 `json:"start_s"`
	EndS     float64 `json:"end_s"`
	Messages uint64  `json:"messages"`
	Bytes    uint64  `json:"bytes"`
	Gbps     float64 `json:"gbps"`
}

// intervalReporter samples the loops' progress counter every interval and
// prints a line per interval, as iperf3 does.
type intervalReporter struct {
	done     chan struct{}
	finished chan []Interval
}

// startIntervals starts reporting; with no interval it does nothing.
func startIntervals(every time.Duration, size int, progress *csrc.Counter, text io.Writer) *intervalReporter {
	r := &intervalReporter{done: make(chan struct{}), finished: make(chan []Interval, 1)}
	if every <= 0 {
		r.finished <- nil
		return r
	}
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		var last uint64
		var out []Interval
		t0 := time.Now()
		prev := t0
		// emit closes the interval ending now. Its figure is over the time
		// that really passed since the last reading, not the nominal tick.
		emit := func(now time.Time) {
			n := progress.Load()
			iv := Interval{
				StartS: prev.Sub(t0).Seconds(), EndS: now.Sub(t0).Seconds(),
				Messages: n - last, Bytes: (n - last) * uint64(size),
			}
			if d := now.Sub(prev).Seconds(); d > 0 {
				iv.Gbps = float64(iv.Bytes) * 8 / d / 1e9
			}
			last, prev = n, now
			out = append(out, iv)
			if text != nil {
				fmt.Fprintf(text, " [%7.2f-%7.2f s] %10d B %12d msgs %10.3f Gb/sec\n", iv.StartS, iv.EndS, size, iv.Messages, iv.Gbps)
			}
		}
		for {
			select {
			case <-r.done:
				// A tick that came due with the end is still an interval.
				select {
				case now := <-tick.C:
					emit(now)
				default:
				}
				// The run's end rarely falls on a tick (the loops drain
				// their last window after it): the partial interval counts
				// when it is at least half an interval.
				if now := time.Now(); now.Sub(prev) >= every/2 {
					emit(now)
				}
				r.finished <- out
				return
			case now := <-tick.C:
				emit(now)
			}
		}
	}()
	return r
}

// stop ends reporting and returns the complete intervals.
func (r *intervalReporter) stop() []Interval {
	close(r.done)
	return <-r.finished
}
