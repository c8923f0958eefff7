package runner

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/results"
)

// MaxPerIter bounds -n under -I 1: each process's row travels to rank 0 in
// one rendezvous message (8 bytes an iteration, base64 in JSON: 700 KB at
// most, within its 1 MiB).
const MaxPerIter = 65536

// iterEvents are -I 1's CUDA events, as nccl-tests records them: on every
// local GPU's stream one mark before each iteration and one after the
// last, or with -z 3 a mark before and after each iteration's collectives.
type iterEvents struct {
	ev     [][]nccl.Event // per local GPU
	paired bool
}

func (r *runner) newIterEvents() error {
	n := r.o.Iters + 1
	r.iev.paired = r.o.Blocking == 3
	if r.iev.paired {
		n = 2 * r.o.Iters
	}
	for i := range r.streams {
		if err := r.lib.SetDevice(r.devs[i]); err != nil {
			return err
		}
		var evs []nccl.Event
		for range n {
			e, err := r.lib.EventCreate()
			if err != nil {
				r.iev.ev = append(r.iev.ev, evs)
				return fmt.Errorf("-I 1: %w", err)
			}
			evs = append(evs, e)
		}
		r.iev.ev = append(r.iev.ev, evs)
	}
	return nil
}

// mark records event idx on every local stream (nothing without -I 1).
func (r *runner) mark(idx int) error {
	for i, evs := range r.iev.ev {
		if err := r.lib.EventRecord(evs[idx], r.streams[i]); err != nil {
			return err
		}
	}
	return nil
}

// iterTimes is this process's time of each iteration in microseconds: the
// slowest local GPU's, divided by -m. The streams must be idle.
func (r *runner) iterTimes() ([]float64, error) {
	out := make([]float64, r.o.Iters)
	for _, evs := range r.iev.ev {
		for it := range out {
			a, b := evs[it], evs[it+1]
			if r.iev.paired {
				a, b = evs[2*it], evs[2*it+1]
			}
			d, err := r.lib.EventElapsed(a, b)
			if err != nil {
				return nil, err
			}
			out[it] = max(out[it], float64(d.Nanoseconds())/1e3/float64(r.o.AggIters))
		}
	}
	return out, nil
}

func (r *runner) freeIterEvents() {
	for i, evs := range r.iev.ev {
		r.lib.SetDevice(r.devs[i])
		for _, e := range evs {
			r.lib.EventDestroy(e)
		}
	}
	r.iev.ev = nil
}

// gatherPerIter brings every process's iteration times to rank 0, which
// gets the combined report; the others get nil.
func (r *runner) gatherPerIter() (*results.NCCLPerIter, error) {
	row, err := r.iterTimes()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 8*len(row))
	for i, v := range row {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(v))
	}
	payload, _ := json.Marshal(buf) // the rendezvous carries JSON: a base64 string
	all, err := r.grp.Gather(payload)
	if err != nil || all == nil {
		return nil, err
	}
	rows := make([][]float64, len(all))
	for p, raw := range all {
		var b []byte
		if err := json.Unmarshal(raw, &b); err != nil || len(b) != len(buf) {
			return nil, fmt.Errorf("process rank %d sent %d bytes of iteration times, want %d", p, len(b), len(buf))
		}
		rows[p] = make([]float64, len(row))
		for i := range rows[p] {
			rows[p][i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	}
	return bench.NewPerIter(rows, r.o.PerIterSkp), nil
}
