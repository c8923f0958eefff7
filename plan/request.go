package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdmabench/rdmabench/internal/durflag"
	"github.com/rdmabench/rdmabench/results"
)

// Request is a test's command line before the plan's rules: the values of
// the flags that shape the plan, as given. The command's flags are bound to
// its fields; Build says what they mean together.
type Request struct {
	Test                              results.Test
	Size                              string // -s, with an optional K or M suffix
	All                               bool   // -a: every power of two
	Iterations, Warmup                uint64
	Duration, Timeout, Interval       time.Duration
	TxDepth, RxDepth, Inline          int // Inline -1: the test's default
	MTU, SL, TC, QPTimeout, CQMod     int
	QP                                int
	QPList                            string // --qps "1,2,4"
	Threads, PostList                 int
	SharedCQ, Bidirectional, ShareCPU bool
	Imm, Verify                       bool
	Transport, Atomic                 string
	Rates                             string // --rate "1000,10000"
	// Repeat is --repeat's count; LatencyFiles: --hgrm or --raw asked.
	Repeat       int
	LatencyFiles bool
	Memory       MemorySpec
	PeerMemory   MemorySpec
	Loads        []Plan
	// Given says whether a flag was on the command line: the defaults of
	// --warmup and -t depend on other flags, -s on -a and the test.
	Given func(flag string) bool
}

// DefaultRateWindow is --rate's requests in flight per QP without -t:
// enough that a schedule of many thousand requests a second is not held
// back by round trips of tens of microseconds, few enough that a stalled
// peer does not bury the link in a backlog.
const DefaultRateWindow = 32

// Build is the request's plan, validated; an error says which flags.
func (r Request) Build() (Plan, error) {
	def := DefaultPlan(r.Test)
	p := def
	p.Iterations, p.TxDepth, p.RxDepth, p.CQMod = r.Iterations, r.TxDepth, r.RxDepth, r.CQMod
	p.MTU, p.SL, p.TC, p.Timeout, p.Warmup = r.MTU, r.SL, r.TC, r.Timeout, r.Warmup
	if r.QPTimeout < 1 || r.QPTimeout > 31 {
		return p, fmt.Errorf("--qp-timeout %d outside 1..31 (4.096 µs × 2^N)", r.QPTimeout)
	}
	p.QPTimeout = r.QPTimeout
	if !r.Given("warmup") { // a tenth of -n, at most the default's
		p.Warmup = min(p.Iterations/10, def.Warmup)
	}
	if r.Duration > MaxDuration {
		return p, fmt.Errorf("--duration %s outside 0..%s seconds", durflag.Seconds(r.Duration), durflag.Seconds(MaxDuration))
	}
	p.Duration = r.Duration
	var err error
	if p.Sizes, err = r.sizes(); err != nil {
		return p, err
	}
	p.Transport, p.Threads, p.SharedCQ, p.Bidirectional = results.Transport(strings.ToUpper(r.Transport)), r.Threads, r.SharedCQ, r.Bidirectional
	p.Imm, p.Atomic, p.PostList, p.Verify = r.Imm, results.AtomicOp(strings.ToUpper(r.Atomic)), r.PostList, r.Verify
	p.ShareCPUs = r.ShareCPU
	if p.QPs, err = r.qps(); err != nil {
		return p, err
	}
	if r.Interval > MaxDuration {
		return p, fmt.Errorf("--interval %s outside 0..%s seconds", durflag.Seconds(r.Interval), durflag.Seconds(MaxDuration))
	}
	p.Interval = r.Interval
	if r.Rates != "" {
		if p.Rates, err = ParseRates(r.Rates); err != nil {
			return p, fmt.Errorf("--rate: %v", err)
		}
		if !r.Given("tx-depth") {
			p.TxDepth = DefaultRateWindow
		}
		if r.Repeat > 1 {
			return p, fmt.Errorf("--rate and --repeat exclude each other (each rate's series is one run's)")
		}
	}
	return r.finish(p)
}

// finish applies the rules that come after the plan's shape: the
// atomics' size, memory, inline, the latency files and the loads.
func (r Request) finish(p Plan) (Plan, error) {
	atomic := r.Test == results.AtomicBW || r.Test == results.AtomicLat
	if atomic && r.Given("size") {
		if n, err := ParseSize(r.Size); err != nil || n != 8 {
			return p, fmt.Errorf("atomics move 8 bytes (-s 8)")
		}
	}
	p.Memory, p.PeerMemory = r.Memory, r.PeerMemory
	p.Inline = r.Inline
	if p.Inline < 0 {
		p.Inline = DefaultInline(r.Test, p.Transport)
	}
	if !r.Test.IsLatency() && r.LatencyFiles {
		return p, fmt.Errorf("--hgrm and --raw apply to latency tests")
	}
	p.Loads = r.Loads
	if len(p.Loads) > 0 && r.Repeat > 1 {
		return p, fmt.Errorf("--load and --repeat exclude each other (each load's figures are one run's)")
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("%v", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return p, nil
}

// sizes is -s, or -a's every power of two; an atomic moves 8 bytes.
func (r Request) sizes() ([]int, error) {
	switch {
	case r.All && r.Given("size"):
		return nil, fmt.Errorf("-a and -s exclude each other")
	case r.All:
		return AllSizes(), nil
	case r.Test == results.AtomicBW || r.Test == results.AtomicLat:
		return []int{8}, nil
	}
	n, err := ParseSize(r.Size)
	if err != nil {
		return nil, err
	}
	return []int{n}, nil
}

// qps is -q, or --qps's sweep.
func (r Request) qps() ([]int, error) {
	if r.QPList == "" {
		return []int{r.QP}, nil
	}
	if r.Given("qp") {
		return nil, fmt.Errorf("-q and --qps exclude each other")
	}
	list, err := ParseIntList(r.QPList)
	if err != nil {
		return nil, fmt.Errorf("--qps: %v", err)
	}
	return list, nil
}

// ParseRates reads --rate's list, in increasing order (the knee is the
// first rate past twice the idle p99), without repeats.
func ParseRates(s string) ([]int, error) {
	list, err := ParseIntList(s)
	if err != nil {
		return nil, err
	}
	slices.Sort(list)
	return slices.Compact(list), nil
}

// ParseIntList reads "1,2,4,8": positive numbers separated by commas.
func ParseIntList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad list %q: want positive numbers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}
