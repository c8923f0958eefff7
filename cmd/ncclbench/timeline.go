package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/nccl/straggler"
)

// maxTimelineMarks bounds the -I 1 marks one process sends rank 0 per
// timed loop for the straggler analysis (4 bytes each, base64 in JSON,
// within a rendezvous message's 1 MiB); a longer loop sends its last
// iterations.
const maxTimelineMarks = 150000

// timelineWire is one GPU's timeline on the wire.
type timelineWire struct {
	AnchorNs int64  `json:"a"`
	ErrNs    int64  `json:"e"`
	Marks    []byte `json:"m"` // float32 microseconds, little-endian
}

// markRange is the marks of the iterations the straggler analysis sees:
// those after -K's, at most maxTimelineMarks of them on all local GPUs.
func (r *runner) markRange() (from, to int) {
	first := r.o.perIterSkp
	limit := maxTimelineMarks / len(r.iev.ev)
	if r.iev.paired {
		first = max(first, r.o.iters-limit/2)
		return 2 * first, 2 * r.o.iters
	}
	first = max(first, r.o.iters+1-limit)
	return first, r.o.iters + 1
}

// timelines anchors this process's marks of the loop just timed on its
// Clock: an anchor event recorded on each idle stream completes between
// the two clock readings around it. The streams must be idle.
func (r *runner) timelines(what string) ([]timelineWire, error) {
	from, to := r.markRange()
	out := make([]timelineWire, len(r.iev.ev))
	for i, evs := range r.iev.ev {
		anchor := evs[len(evs)-1]
		if err := r.lib.SetDevice(r.devs[i]); err != nil {
			return nil, err
		}
		ta := launch.Clock()
		if err := r.lib.EventRecord(anchor, r.streams[i]); err != nil {
			return nil, err
		}
		if err := r.wait(what+" (clock anchor)", 1); err != nil {
			return nil, err
		}
		tb := launch.Clock()
		w := timelineWire{AnchorNs: (ta + tb) / 2, ErrNs: (tb - ta + 1) / 2, Marks: make([]byte, 4*(to-from))}
		for m := from; m < to; m++ {
			d, err := r.lib.EventElapsed(evs[m], anchor)
			if err != nil {
				return nil, err
			}
			binary.LittleEndian.PutUint32(w.Marks[4*(m-from):], math.Float32bits(-float32(float64(d.Nanoseconds())/1e3)))
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
		if err := json.Unmarshal(raw, &ws); err != nil || len(ws) != r.o.ngpus {
			return fmt.Errorf("process rank %d sent a bad timeline (%v)", proc, err)
		}
		var off launch.ClockOffset
		if proc < len(r.offs) {
			off = r.offs[proc]
		}
		for _, w := range ws {
			tl := straggler.Timeline{AnchorNs: w.AnchorNs - off.OffsetNs, ErrNs: w.ErrNs + off.ErrNs, MarksUs: make([]float32, len(w.Marks)/4)}
			for m := range tl.MarksUs {
				tl.MarksUs[m] = math.Float32frombits(binary.LittleEndian.Uint32(w.Marks[4*m:]))
			}
			tls = append(tls, tl)
		}
	}
	half := "out-of-place"
	if inPlace {
		half = "in-place"
	}
	r.segs = append(r.segs, straggler.NewSegment(fmt.Sprintf("%d bytes %s", size, half), tls, r.iev.paired))
	return nil
}

// measureClocks has rank 0 learn every process's clock offset for the
// straggler analysis (-I 1 with several processes).
func (r *runner) measureClocks() error {
	if r.o.perIter != 1 || r.env.Size == 1 {
		return nil
	}
	offs, err := r.grp.MeasureClocks(16, time.Now().Add(r.o.rdvTimeout))
	if err != nil {
		return fmt.Errorf("clock alignment: %w", err)
	}
	r.offs = offs
	return nil
}

// stragglers is the analysis of every timed loop (rank 0; nil without -I 1).
func (r *runner) stragglers(devices []bench.Device) *straggler.Report {
	if len(r.segs) == 0 || r.nranks < 2 {
		return nil
	}
	ranks := make([]straggler.Rank, len(devices))
	for i, d := range devices {
		ranks[i] = straggler.Rank{Rank: d.Rank, Host: d.Host, Device: d.Device, Pid: d.Pid}
	}
	rep := straggler.Analyze(r.segs, ranks, straggler.Default)
	return &rep
}
