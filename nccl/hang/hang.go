// Package hang says which process holds a run up when a collective misses
// its deadline (-T), as NCCL's RAS does: each process counts the
// collectives it entered and those it knows finished, rank 0 asks every
// process for its count, and the verdict names who never entered or never
// finished which one, or who stopped answering.
package hang

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/internal/intlist"
)

// Progress is where one process is: collectives are numbered from 1 in
// the order every process issues them (warmup and checks included).
type Progress struct {
	Entered  int64 `json:"entered"`  // the last collective issued
	Finished int64 `json:"finished"` // every one up to this is known done
	// Pending describes the first collective not known done (Finished+1),
	// when entered: "ncclAllReduce of 1024 bytes".
	Pending string `json:"pending,omitempty"`
}

// Tracker counts one process's collectives; safe to read from any goroutine.
type Tracker struct {
	mu sync.Mutex
	p  Progress
}

// Enter records that the next collective, what, was issued.
func (t *Tracker) Enter(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.p.Entered == t.p.Finished {
		t.p.Pending = what
	}
	t.p.Entered++
}

// FinishAll records that every collective issued so far is done.
func (t *Tracker) FinishAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.p.Finished, t.p.Pending = t.p.Entered, ""
}

// Snapshot is the progress now.
func (t *Tracker) Snapshot() Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}

// JSON is the snapshot as the census carries it.
func (t *Tracker) JSON() []byte {
	b, _ := json.Marshal(t.Snapshot())
	return b
}

// Proc names a process in the verdict.
type Proc struct {
	Rank int
	Host string
	Pid  int
	GPUs []int // the devices of its NCCL ranks
}

func (p Proc) String() string {
	var g []string
	for _, d := range p.GPUs {
		g = append(g, fmt.Sprint(d))
	}
	gpu := "GPU"
	if len(g) > 1 {
		gpu = "GPUs"
	}
	return fmt.Sprintf("process rank %d (%s %s %s, pid %d)", p.Rank, p.Host, gpu, strings.Join(g, ","), p.Pid)
}

// Seen is what rank 0 knows of a process when the deadline passed.
type Seen struct {
	Proc     Proc
	Answered bool      // it answered the census
	Progress *Progress // what it said (or last published); nil: nothing
	Ago      time.Duration
}

// Verdict is the one line every process reports: which collective did
// not finish, and which processes never entered it, never finished it or
// did not answer within waited.
func Verdict(seen []Seen, waited, perOp time.Duration) string {
	var silent, live []Seen
	for _, s := range seen {
		if s.Answered && s.Progress != nil {
			live = append(live, s)
		} else {
			silent = append(silent, s)
		}
	}
	if len(live) == 0 {
		return fmt.Sprintf("timeout: a collective did not finish within %v (-T) and no process answered", perOp)
	}
	// The first collective some live process has not seen finish, and
	// the last any entered: with collectives queued (-z 0) a process only
	// learns they finished when its stream is idle, so which of those ran
	// is not known.
	stuck, last := live[0].Progress.Finished+1, int64(0)
	what := ""
	for _, s := range live {
		stuck = min(stuck, s.Progress.Finished+1)
		last = max(last, s.Progress.Entered)
	}
	var entered, notEntered []Seen
	for _, s := range live {
		if s.Progress.Entered >= stuck {
			entered = append(entered, s)
			if s.Progress.Finished+1 == stuck && what == "" {
				what = s.Progress.Pending
			}
		} else {
			notEntered = append(notEntered, s)
		}
	}
	if what != "" {
		what = " (" + what + ")"
	}
	var b strings.Builder
	it := "it"
	if last > stuck {
		it = "them"
		fmt.Fprintf(&b, "timeout: collectives #%d-#%d%s were not seen to finish within %v (-T; queued, so which of them ran is not known): ", stuck, last, what, perOp)
	} else {
		fmt.Fprintf(&b, "timeout: collective #%d%s did not finish within %v (-T): ", stuck, what, perOp)
	}
	var blame []string
	for _, s := range silent {
		last := "nothing heard from it since the rendezvous"
		if p := s.Progress; p != nil {
			last = fmt.Sprintf("last heard %v before: entered #%d, finished #%d", s.Ago.Round(time.Millisecond), p.Entered, p.Finished)
		}
		blame = append(blame, fmt.Sprintf("%s did not answer for %v, stopped or hung (%s)", s.Proc, waited.Round(time.Millisecond), last))
	}
	for _, s := range notEntered {
		blame = append(blame, fmt.Sprintf("%s never entered #%d (it is at #%d)", s.Proc, stuck, s.Progress.Entered))
	}
	if len(blame) == 0 {
		fmt.Fprintf(&b, "every process entered %s and none saw %s finish (stuck in NCCL, on a GPU or in the network)", it, it)
		return b.String()
	}
	b.WriteString(list(blame))
	if len(entered) > 0 {
		var rs []int
		for _, s := range entered {
			rs = append(rs, s.Proc.Rank)
		}
		fmt.Fprintf(&b, "; %s entered %s and wait", ranks(rs), it)
	}
	return b.String()
}

// list joins at most 8 items, then says how many more.
func list(items []string) string {
	const most = 8
	if len(items) <= most {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:most], "; ") + fmt.Sprintf("; and %d more", len(items)-most)
}

// ranks writes "process rank 3" or "process ranks 0-2, 5".
func ranks(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("process rank %d", rs[0])
	}
	return "process ranks " + strings.Join(intlist.Ranges(rs), ", ")
}
