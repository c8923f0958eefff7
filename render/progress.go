package render

import (
	"fmt"
	"io"
	"time"

	"github.com/rdmabench/rdmabench/results"
)

// Observer is what engine's client tells as a run is measured (the same
// methods as engine.Observer; render does not import engine).
type Observer interface {
	Start(run *results.Run) error
	Measured(run *results.Run, res results.Result) error
	Interval(size int, iv results.Interval)
	End(run *results.Run) error
}

// Progress keeps one line at the bottom of a terminal under the table an
// inner observer prints to the same terminal: measurements done of all,
// time spent and time left (from the mean time of those done). The line is
// erased before the inner observer writes and drawn again after, so that
// it never ends up in the table. Use it only when W is a terminal: a pipe
// or a file must get the table alone.
type Progress struct {
	Inner Observer
	W     io.Writer
	Total int // measurements in the whole run (sizes × QP counts × repeats)
	Now   func() time.Time

	start time.Time
	done  int
	shown bool
}

const eraseLine = "\r\x1b[K"

func (p *Progress) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Progress) erase() {
	if p.shown {
		io.WriteString(p.W, eraseLine)
		p.shown = false
	}
}

func (p *Progress) draw() {
	io.WriteString(p.W, eraseLine+progressText(p.done, p.Total, "measured", p.now().Sub(p.start)))
	p.shown = true
}

// progressText is " 3/10 measured, 5s elapsed, about 12s left": the time
// left from the mean time of those done.
func progressText(done, total int, what string, elapsed time.Duration) string {
	line := fmt.Sprintf(" %d/%d %s, %s elapsed", done, total, what, elapsed.Round(time.Second))
	if done > 0 && done < total {
		left := elapsed / time.Duration(done) * time.Duration(total-done)
		line += fmt.Sprintf(", about %s left", left.Round(time.Second))
	}
	return line
}

// Start passes the header on and shows the line; the clock starts at the
// first Start, so repeats share one estimate.
func (p *Progress) Start(r *results.Run) error {
	if p.start.IsZero() {
		p.start = p.now()
	}
	p.erase()
	err := p.Inner.Start(r)
	p.draw()
	return err
}

// Measured passes the row on and counts it.
func (p *Progress) Measured(r *results.Run, res results.Result) error {
	p.erase()
	err := p.Inner.Measured(r, res)
	p.done++
	p.draw()
	return err
}

// Interval passes the line on. It is called from engine's sampling
// goroutine, but never while Measured runs: rows come after a size's
// intervals have stopped.
func (p *Progress) Interval(size int, iv results.Interval) {
	p.erase()
	p.Inner.Interval(size, iv)
	p.draw()
}

// End erases the line and passes the footer on.
func (p *Progress) End(r *results.Run) error {
	p.erase()
	return p.Inner.End(r)
}

// Rounds shows a mesh's progress: one line after each round, for the log
// (under a launcher, a terminal cannot be told from the launcher's own
// pseudo-terminal, whose output may well go to a file: no line drawn over
// itself, then).
type Rounds struct {
	W      io.Writer
	Prefix string
	Now    func() time.Time
	start  time.Time
	// retests is when the retests started (the last round's end): their
	// time left comes from their own pace, not the rounds'.
	retests time.Time
}

// Begin starts the clock.
func (r *Rounds) Begin() { r.start = r.now() }

func (r *Rounds) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Done shows done of total rounds.
func (r *Rounds) Done(done, total int) {
	r.line(done, total, "rounds done", r.start)
	if done == total {
		r.retests = r.now()
	}
}

// Retested shows done of total retests, on a clock of their own that
// started when the last round ended.
func (r *Rounds) Retested(done, total int) {
	start := r.retests
	if start.IsZero() {
		start = r.start
	}
	r.line(done, total, "retests done", start)
}

// Searched shows a quick search's rounds done: total is the most it may
// run, not what it will (it stops once every suspect is named or
// cleared), so no time left is guessed.
func (r *Rounds) Searched(done, most int) {
	fmt.Fprintf(r.W, "%s %d rounds done, %s elapsed (the search stops when every suspect is named or cleared; at most %d)\n",
		r.Prefix, done, r.now().Sub(r.start).Round(time.Second), most)
}

func (r *Rounds) line(done, total int, what string, since time.Time) {
	fmt.Fprintf(r.W, "%s%s\n", r.Prefix, progressText(done, total, what, r.now().Sub(since)))
}
