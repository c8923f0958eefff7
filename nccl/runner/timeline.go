package runner

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/nccl/straggler"
	"github.com/rdmabench/rdmabench/results"
)

// maxTimelineIters bounds the iterations one process sends rank 0 per
// timed loop for the straggler analysis (8 bytes each and GPU, base64 in
// JSON, within a rendezvous message's 1 MiB); a longer loop sends its
// last iterations.
const maxTimelineIters = 75000

// timelineEvents are the straggler analysis's events beside -I 1's. With
// -z 0 -I 1's mark before each iteration is where the rank entered it, the
// next where it finished. With -z 1-3 the host waits for each collective,
// so the mark before an iteration is when this process issued it, and fin
// marks where its GPU finished it, recorded right after the issue.
type timelineEvents struct {
	fin    [][]nccl.Event // per local GPU, per iteration; -z 1-3 only
	anchor []nccl.Event   // per local GPU
	at     int            // 1 + the timed iteration being issued; 0: none
}

func (r *runner) newTimelineEvents() error {
	tl := &r.tl
	for i := range r.streams {
		if err := r.lib.SetDevice(r.devs[i]); err != nil {
			return err
		}
		n := 1
		if r.o.Blocking != 0 {
			n += r.o.Iters
		}
		var evs []nccl.Event
		for range n {
			e, err := r.lib.EventCreate()
			if err != nil {
				tl.anchor = append(tl.anchor, evs...)
				return fmt.Errorf("-I 1: %w", err)
			}
			evs = append(evs, e)
		}
		tl.anchor = append(tl.anchor, evs[0])
		if r.o.Blocking != 0 {
			tl.fin = append(tl.fin, evs[1:])
		}
	}
	return nil
}

// markFinish records, with -z 1-3, where each local GPU finishes the
// timed iteration just issued (nothing otherwise).
func (r *runner) markFinish() error {
	if r.tl.at == 0 || r.tl.fin == nil {
		return nil
	}
	for i, evs := range r.tl.fin {
		if err := r.lib.EventRecord(evs[r.tl.at-1], r.streams[i]); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) freeTimelineEvents() {
	for i, e := range r.tl.anchor {
		r.lib.SetDevice(r.devs[i])
		r.lib.EventDestroy(e)
		if r.tl.fin != nil {
			for _, f := range r.tl.fin[i] {
				r.lib.EventDestroy(f)
			}
		}
	}
	r.tl = timelineEvents{}
}

// timelineWire is one GPU's timeline on the wire.
type timelineWire struct {
	AnchorNs int64  `json:"a"`
	ErrNs    int64  `json:"e"`
	Enter    []byte `json:"s"` // float32 microseconds after the anchor, little-endian
	Finish   []byte `json:"f"`
}

// anchorTries is how many anchors timelines records per GPU, keeping the
// one whose two clock readings are closest: a process descheduled
// between them widens the bound, and on a busy host one anchor in a few
// came out milliseconds wide, wider than the steady lag of a rank 10%
// slow in 5 ms iterations (the straggler analysis cannot tell a steady
// lag within the bound from a clock offset).
const anchorTries = 8

// timelines anchors this process's entries and finishes of the loop just
// timed on its Clock: an anchor event recorded on each idle stream
// completes between the two clock readings around it, the closest pair
// of anchorTries. The iterations are those after -K's (at most
// maxTimelineIters). The streams must be idle.
func (r *runner) timelines(what string) ([]timelineWire, error) {
	first := max(r.o.PerIterSkp, r.o.Iters-maxTimelineIters/len(r.streams))
	n := r.o.Iters - first
	out := make([]timelineWire, len(r.streams))
	for i, evs := range r.iev.ev {
		enterOf := func(it int) nccl.Event {
			if r.iev.paired {
				return evs[2*it]
			}
			return evs[it]
		}
		// Every time goes through ref, the first entry, which stays put
		// while the anchor event is recorded again.
		anchor, ref := r.tl.anchor[i], enterOf(first)
		if err := r.lib.SetDevice(r.devs[i]); err != nil {
			return nil, err
		}
		var w timelineWire
		var refToAnchor time.Duration
		width := int64(math.MaxInt64)
		for range anchorTries {
			ta := launch.Clock()
			if err := r.lib.EventRecord(anchor, r.streams[i]); err != nil {
				return nil, err
			}
			if err := r.wait(what+" (clock anchor)", 1); err != nil {
				return nil, err
			}
			tb := launch.Clock()
			if tb-ta >= width {
				continue
			}
			width = tb - ta
			d, err := r.lib.EventElapsed(ref, anchor)
			if err != nil {
				return nil, err
			}
			w.AnchorNs, w.ErrNs, refToAnchor = (ta+tb)/2, (tb-ta+1)/2, d
		}
		w.Enter, w.Finish = make([]byte, 4*n), make([]byte, 4*n)
		put := func(b []byte, j int, e nccl.Event) error {
			d, err := r.lib.EventElapsed(ref, e)
			us := float64((d - refToAnchor).Nanoseconds()) / 1e3
			binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(float32(us)))
			return err
		}
		for it := first; it < r.o.Iters; it++ {
			enter, finish := enterOf(it), evs[it+1]
			if r.tl.fin != nil { // -z 1-3, paired (-z 3) or not
				finish = r.tl.fin[i][it]
			}
			if err := put(w.Enter, it-first, enter); err != nil {
				return nil, err
			}
			if err := put(w.Finish, it-first, finish); err != nil {
				return nil, err
			}
		}
		out[i] = w
	}
	return out, nil
}

// gatherTimelines brings every GPU's timeline of the loop just timed to
// rank 0, which adds it, on its own clock, to the straggler analysis.
func (r *runner) gatherTimelines(what string, size int, inPlace bool) error {
	mine, err := r.timelines(what)
	if err != nil {
		return err
	}
	payload, _ := json.Marshal(mine)
	all, err := r.grp.Gather(payload)
	if err != nil || all == nil {
		return err
	}
	var tls []straggler.Timeline
	for proc, raw := range all {
		var ws []timelineWire
		if err := json.Unmarshal(raw, &ws); err != nil || len(ws) != r.o.Ngpus {
			return fmt.Errorf("process rank %d sent a bad timeline (%v)", proc, err)
		}
		var off launch.ClockOffset
		if proc < len(r.offs) {
			off = r.offs[proc]
		}
		for _, w := range ws {
			if len(w.Enter) != len(w.Finish) || len(w.Enter) != len(mine[0].Enter) {
				return fmt.Errorf("process rank %d sent a bad timeline (%d and %d bytes)", proc, len(w.Enter), len(w.Finish))
			}
			tls = append(tls, straggler.Timeline{AnchorNs: w.AnchorNs - off.OffsetNs, ErrNs: w.ErrNs + off.ErrNs,
				EnterUs: float32s(w.Enter), FinishUs: float32s(w.Finish)})
		}
	}
	half := "out-of-place"
	if inPlace {
		half = "in-place"
	}
	r.segs = append(r.segs, straggler.NewSegment(fmt.Sprintf("%d bytes %s", size, half), tls))
	return nil
}

func float32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// measureClocks has rank 0 learn every process's clock offset for the
// straggler analysis (-I 1 with several processes).
func (r *runner) measureClocks() error {
	if r.o.PerIter != 1 || r.env.Size == 1 {
		return nil
	}
	offs, err := r.grp.MeasureClocks(16, time.Now().Add(r.o.RdvTimeout))
	if err != nil {
		return fmt.Errorf("clock alignment: %w", err)
	}
	r.offs = offs
	return nil
}

// stragglers is the analysis of every timed loop (rank 0; nil without -I 1).
func (r *runner) stragglers(devices []results.NCCLDevice) *results.StragglerReport {
	if len(r.segs) == 0 || r.nranks < 2 {
		return nil
	}
	ranks := make([]results.StragglerRank, len(devices))
	for i, d := range devices {
		ranks[i] = results.StragglerRank{Rank: d.Rank, Host: d.Host, Device: d.Device, Pid: d.Pid}
	}
	rep := straggler.Analyze(r.segs, ranks, straggler.Default)
	return &rep
}
