package runner

import (
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/results"
)

// checkHalf is -c: check times it runs the collective on known input and
// counts the wrong values over the processes, stopping at the first run
// with any (res.Wrong). -G checks what a graph's launch computed, as
// nccl-tests does.
func (r *runner) checkHalf(k bench.Case, inPlace bool, what string, check int, res *results.NCCLResult) error {
	for c := 0; c < check; c++ {
		res.Checked = true
		if err := r.initData(k, inPlace); err != nil {
			return err
		}
		if r.o.Graphs > 0 {
			if _, _, err := r.graphed(k, inPlace, what+" (check)", 1, 1, 1); err != nil {
				return err
			}
		} else if err := r.start(k, inPlace); err != nil {
			return err
		}
		if err := r.wait(what+" (check)", 1); err != nil {
			return err
		}
		w, err := r.countWrong(k, inPlace)
		if err != nil {
			return err
		}
		if w != 0 {
			r.badHalves++
		}
		tot, err := r.grp.Reduce([]float64{float64(w)}, launch.Sum)
		if err != nil {
			return err
		}
		res.Wrong = int64(tot[0])
		if res.Wrong != 0 {
			break
		}
	}
	return nil
}

// initData zeroes the receive buffers and copies each rank's input into
// its send buffer (in place: its slice of the receive buffer).
func (r *runner) initData(k bench.Case, inPlace bool) error {
	ts := k.Type.Size
	for i := range r.comms {
		rank := r.ranks[i]
		if err := r.lib.SetDevice(r.devs[i]); err != nil {
			return err
		}
		if err := r.lib.Memset(r.recv[i], 0, max(k.C.Recv, k.C.Send)*ts); err != nil {
			return err
		}
		dst := r.send[i]
		if inPlace {
			dst = r.recv[i] + nccl.DevPtr(k.C.SendInplace*rank*ts)
		}
		if err := r.lib.MemcpyH2D(dst, k.Input(rank)); err != nil {
			return err
		}
	}
	return nil
}

// countWrong compares every local GPU's result with what it should be.
func (r *runner) countWrong(k bench.Case, inPlace bool) (int64, error) {
	ts := k.Type.Size
	var wrong int64
	var shared []byte // results that are the same on every rank are computed once
	for i := range r.comms {
		rank := r.ranks[i]
		want := shared
		if want == nil {
			want = k.Expected(rank, inPlace)
			if k.SameOnAllRanks() {
				shared = want
			}
		}
		src := r.recv[i]
		if inPlace {
			src += nccl.DevPtr(k.C.RecvInplace * rank * ts)
		}
		got := make([]byte, len(want))
		if err := r.lib.MemcpyD2H(got, src); err != nil {
			return 0, err
		}
		wrong += k.Wrong(got, want)
	}
	return wrong, nil
}
