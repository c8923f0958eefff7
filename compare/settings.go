package compare

import (
	"fmt"
	"slices"

	"github.com/rdmabench/rdmabench/results"
)

// settings sets the runs' settings side by side. Some change what the
// figures are, and the comparison is refused (ErrInvalid):
//
//   - the test: another operation is another figure;
//   - -b: a bidirectional figure is the sum of both directions, about twice
//     a unidirectional one;
//   - --load: the loads' QPs run on the same link between each size's idle
//     ping-pongs, so the idle figure follows a loaded pass on one side only;
//   - --rate: likewise, the open-loop passes run between the sizes on one
//     side only;
//   - no size and QP count in common (checked by Runs).
//
// The others move the figures by degrees, and each is a note under the
// table: device, peer, transport, mode, MTU, memory, depths (-t), CQ
// moderation, inline size, post list, threads, a shared CQ, iterations or
// duration, warm-up, --verify, the atomic operation, immediate data, an
// error or Ctrl-C that cut a run short.
func settings(base, cur *results.Run) ([]string, error) {
	if base.Test != cur.Test {
		return nil, invalid("the base ran %s and the new run %s: only runs of one test compare", base.Test, cur.Test)
	}
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	for _, s := range []struct {
		what      string
		base, cur bool
	}{
		{"bidirectional (-b)", base.Bidirectional, cur.Bidirectional},
		{"background loads (--load)", loaded(base), loaded(cur)},
		{"open-loop rates (--rate)", rated(base), rated(cur)},
	} {
		if s.base != s.cur {
			return nil, invalid("%s is %s in the base and %s in the new run: the figures mean different things", s.what, onOff(s.base), onOff(s.cur))
		}
	}
	var notes []string
	diff := func(what string, a, b any) {
		as, bs := fmt.Sprint(a), fmt.Sprint(b)
		if as != bs {
			notes = append(notes, fmt.Sprintf("%s differs: base %s, new %s", what, orNone(as), orNone(bs)))
		}
	}
	diff("device", base.Device, cur.Device)
	diff("peer", base.Peer, cur.Peer)
	diff("transport", base.Transport, cur.Transport)
	diff("mode", base.Mode, cur.Mode)
	diff("MTU", base.MTU, cur.MTU)
	// Where the bytes live moves bandwidth as much as the link does. A run
	// from before memory was recorded (nil) was on host memory somewhere:
	// it differs only from GPU memory.
	for _, m := range []struct {
		what string
		a, b *results.Memory
	}{{"memory", base.Memory, cur.Memory}, {"peer memory", base.PeerMemory, cur.PeerMemory}} {
		onGPU := func(x *results.Memory) bool { return x != nil && x.Kind == results.GPUMemory }
		if (m.a != nil && m.b != nil) || onGPU(m.a) || onGPU(m.b) {
			diff(m.what, m.a.String(), m.b.String())
		}
	}
	diff("tx depth (-t)", base.TxDepth, cur.TxDepth)
	diff("CQ moderation", base.CQMod, cur.CQMod)
	diff("inline size", base.Inline, cur.Inline)
	diff("post list", base.PostList, cur.PostList)
	diff("threads", base.Threads, cur.Threads)
	diff("shared CQ", onOff(base.SharedCQ), onOff(cur.SharedCQ))
	diff("duration (-D, s)", durationOf(base), durationOf(cur))
	if base.Duration == 0 && cur.Duration == 0 {
		if n, example := iterationsDiffer(base, cur); n > 0 {
			notes = append(notes, fmt.Sprintf("iterations differ at %d size(s), e.g. %s", n, example))
		}
	}
	diff("warm-up iterations", base.Warmup, cur.Warmup)
	diff("--verify", onOff(base.Verify), onOff(cur.Verify))
	diff("atomic operation", base.Atomic, cur.Atomic)
	diff("immediate data", onOff(base.Imm), onOff(cur.Imm))
	for _, r := range []struct {
		name string
		run  *results.Run
	}{{"base", base}, {"new", cur}} {
		if r.run.Error != "" {
			notes = append(notes, fmt.Sprintf("the %s run ended with an error: %s", r.name, r.run.Error))
		}
		if r.run.Interrupted {
			notes = append(notes, fmt.Sprintf("the %s run was interrupted (Ctrl-C)", r.name))
		}
	}
	return notes, nil
}

func orNone(s string) string {
	if s == "" || s == "0" {
		return "(none)"
	}
	return s
}

func loaded(r *results.Run) bool {
	return slices.ContainsFunc(r.Results, func(x results.Result) bool { return x.Loaded != nil || len(x.Loads) > 0 })
}

func rated(r *results.Run) bool {
	return r.RateLatency != "" || slices.ContainsFunc(r.Results, func(x results.Result) bool { return len(x.Rates) > 0 })
}

// durationOf names how long each size ran: seconds, or "iterations" when
// counted (-n).
func durationOf(r *results.Run) string {
	if r.Duration == 0 {
		return "iterations (-n)"
	}
	return fmt.Sprint(r.Duration)
}

// iterationsDiffer counts the sizes both runs measured with other
// iteration counts a repeat, and names the first.
func iterationsDiffer(base, cur *results.Run) (int, string) {
	perRepeat := func(r results.Result) uint64 { return r.Iterations / uint64(max(1, len(r.Repeats))) }
	type key struct{ size, qps int }
	curIters := map[key]uint64{}
	for _, r := range cur.Results {
		curIters[key{r.Size, r.QPs}] = perRepeat(r)
	}
	n, example := 0, ""
	for _, b := range base.Results {
		c, ok := curIters[key{b.Size, b.QPs}]
		if !ok || c == perRepeat(b) || c == 0 || perRepeat(b) == 0 {
			continue
		}
		if n == 0 {
			example = fmt.Sprintf("%d B: base %d, new %d", b.Size, perRepeat(b), c)
		}
		n++
	}
	return n, example
}
