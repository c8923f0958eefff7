package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/csrc"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/results"
	"github.com/rdmabench/rdmabench/verbs"
)

func TestLatencyRecorderExactAndMerged(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var all []int64
	a, b := NewLatencyRecorder(), NewLatencyRecorder()
	for i := 0; i < 20000; i++ {
		v := int64(1000 + rng.ExpFloat64()*3000)
		all = append(all, v)
		if i%2 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(b) // one recorder per thread, merged after the run
	st := a.Stats()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	var sum, sq float64
	for _, v := range all {
		sum += float64(v)
	}
	mean := sum / float64(len(all))
	for _, v := range all {
		sq += (float64(v) - mean) * (float64(v) - mean)
	}
	sd := math.Sqrt(sq / float64(len(all)-1))
	if st.Min != float64(all[0])/1e3 || st.Max != float64(all[len(all)-1])/1e3 {
		t.Errorf("min/max %v/%v, want exact %v/%v", st.Min, st.Max, all[0], all[len(all)-1])
	}
	if math.Abs(st.Mean-mean/1e3) > 1e-9 || math.Abs(st.Stdev-sd/1e3) > 1e-6 {
		t.Errorf("mean/stdev %v/%v, want %v/%v", st.Mean, st.Stdev, mean/1e3, sd/1e3)
	}
	p99 := float64(all[int(math.Ceil(0.99*float64(len(all))))-1]) / 1e3
	if math.Abs(st.P99-p99) > p99*0.001+0.001 {
		t.Errorf("p99 %v, exact %v", st.P99, p99)
	}
}

func TestBandwidthResult(t *testing.T) {
	r := BandwidthResult(65536, 1000, 0.5, 0)
	want := 65536.0 * 1000 * 8 / 0.5 / 1e9
	if math.Abs(r.BWAvgGbps-want) > 1e-9 || r.BWBurstGbps != r.BWAvgGbps || math.Abs(r.MsgRateMpps-0.002) > 1e-12 {
		t.Errorf("%+v, want avg %v", r, want)
	}
}

func TestBudgetRefusesBeforeAllocating(t *testing.T) {
	big := rbplan.DefaultPlan(WriteBW)
	big.Verify, big.Sizes, big.QPs = true, []int{8 << 20}, []int{1024}
	lat := rbplan.DefaultPlan(SendLat)
	lat.QPs = []int{100}
	small := rbplan.DefaultPlan(WriteBW)
	threads65 := rbplan.DefaultPlan(WriteBW)
	threads65.QPs, threads65.Threads = []int{65}, 65
	tests := []struct {
		plan   Plan
		budget Budget
		want   string
	}{
		{big, Budget{MaxMem: 1 << 30}, "registered memory, this server allows 1.0 GiB (serve --max-mem)"},
		{big, Budget{MaxMem: 1 << 50, MaxQPs: 512}, "the plan needs 1024 QPs, this server allows 512 (serve --max-qps)"},
		{lat, Budget{MaxMem: 1 << 30}, "the plan needs 100 loop threads, this server allows 64 (serve --max-threads)"},
		{small, Budget{MaxMem: 1 << 30}, ""},
		// --loopback: no serve to configure; the plan's own bounds (what
		// --help claims: --threads 1..256) hold, and memory is this
		// host's (issue 48: "write-bw --loopback --threads 65 -q 65" was
		// refused with "(serve --max-threads)").
		{threads65, Budget{MaxMem: 1 << 30, Loopback: true}, ""},
		{lat, Budget{MaxMem: 1 << 30, Loopback: true}, ""},
		{big, Budget{MaxMem: 1 << 30, Loopback: true}, "on each side, this host allows one side 1.0 GiB (a quarter of RAM, or the memlock limit: ulimit -l)"},
	}
	for _, tt := range tests {
		err := tt.budget.check(tt.plan, nil)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%v: refused: %v", tt.plan.Test, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err %v, want %q", tt.plan.Test, err, tt.want)
		}
		if err != nil && tt.budget.Loopback && strings.Contains(err.Error(), "serve") {
			t.Errorf("loopback: %v names serve, which a loopback run has none of", err)
		}
	}
	if m := PlanMemory(big); m < 1024*2*(8<<20) {
		t.Errorf("PlanMemory says %d for 1024 QPs of 8 MiB slots", m)
	}
}

// CQs are sized to what can be outstanding, and depths lowered (and said)
// where the device's max_cqe cannot hold them.
func TestShapeCQsFitsMaxCQE(t *testing.T) {
	send := rbplan.DefaultPlan(SendBW)
	send.QPs = []int{512}
	c := shapeCQs(send, 32767)
	if c.recvCQE() > 32767 || c.sendCQE() > 32767 || !c.cappedRx || c.rxDepth < 32 || c.rxDepth >= 512 {
		t.Errorf("-q 512 send: %+v, recv CQE %d", c, c.recvCQE())
	}
	if c.cappedTx || c.txDepth != 128 {
		t.Errorf("-q 512 send: tx depth %d lowered (%v); 3 signaled completions a QP fit", c.txDepth, c.cappedTx)
	}
	write := rbplan.DefaultPlan(WriteBW)
	write.QPs = []int{1024}
	if c := shapeCQs(write, 32767); c.cappedTx || c.cappedRx || c.recvCQE() != 1 || c.sendCQE() != 1024*(2+2) {
		t.Errorf("-q 1024 write: %+v, send CQE %d, recv CQE %d", c, c.sendCQE(), c.recvCQE())
	}
	one := rbplan.DefaultPlan(SendBW)
	if c := shapeCQs(one, 32767); c.cappedRx || c.recvCQE() != 512 {
		t.Errorf("-q 1 send: %+v", c)
	}
}

// A step's deadline grows with its bytes, so a slow link is not taken for a
// dead peer.
func TestStepTimeGrowsWithWork(t *testing.T) {
	p := rbplan.DefaultPlan(WriteBW)
	p.Iterations, p.Warmup = 1000, 0
	small, large := stepTime(p, 2), stepTime(p, 8<<20)
	if small < p.Timeout || large < p.Timeout+7000*time.Second {
		t.Errorf("step time 2 B: %v, 8 MiB × 1000: %v", small, large)
	}
	p.Duration = 10 * time.Second
	if d := stepTime(p, 8<<20); d != p.Timeout+p.Duration {
		t.Errorf("duration mode: %v", d)
	}
}

func TestLoopCPUs(t *testing.T) {
	p := rbplan.DefaultPlan(WriteBW)
	p.Threads, p.QPs = 4, []int{4}
	s := &side{}
	if _, err := s.loopCPUs(DeviceConfig{CPUs: []int{0, 0}}, "x", p); err == nil || !strings.Contains(err.Error(), "4 busy-polling loop threads would share 2 CPUs") {
		t.Errorf("4 threads on 2 CPUs: %v", err)
	}
	p.ShareCPUs = true
	if _, err := s.loopCPUs(DeviceConfig{CPUs: []int{0, 0}}, "x", p); err != nil {
		t.Errorf("with --share-cpus: %v", err)
	}
	for _, tt := range []struct{ in, c, s []int }{{[]int{0, 1, 2, 3}, []int{0, 1}, []int{2, 3}}, {[]int{5, 6, 7}, []int{5, 6}, []int{7}}, {[]int{3}, []int{3}, []int{3}}} {
		c, sv := splitCPUs(tt.in)
		if fmt.Sprint(c, sv) != fmt.Sprint(tt.c, tt.s) {
			t.Errorf("splitCPUs(%v) = %v, %v", tt.in, c, sv)
		}
	}
	b := rbplan.DefaultPlan(SendBW)
	b.Bidirectional, b.Threads, b.QPs = true, 2, []int{4}
	if n := loopThreads(b); n != 4 {
		t.Errorf("-b send, 2 threads: %d loop threads, want 4", n)
	}
}

// A connect that gets no TCP answer says it is below any server process.
// The only way to get one on 127.0.0.1 is a listener whose accept queue is
// full (the kernel then drops SYNs): one that never accepts, which Serve
// is not.
func TestDialTimeoutSaysWhichLayer(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
	d := net.Dialer{Timeout: 300 * time.Millisecond}
	var last error
	for range 8 { // the queue holds one or two; the rest time out
		c, err := d.Dial("tcp", addr)
		if err != nil {
			last = err
			break
		}
		defer c.Close()
	}
	if last == nil {
		t.Fatal("every connect to a listener that never accepts succeeded")
	}
	msg := dialError(context.Background(), addr, last).Error()
	if !strings.Contains(msg, "no TCP answer") || !strings.Contains(msg, "even a busy one") {
		t.Errorf("dial timeout: %s", msg)
	}
	if msg := dialError(context.Background(), addr, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}).Error(); strings.Contains(msg, "no TCP answer") {
		t.Errorf("refused connect: %s", msg)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if msg := dialError(ended, addr, last).Error(); strings.Contains(msg, "no TCP answer") {
		t.Errorf("the run's own deadline: %s", msg)
	}
}

// The loop result a measurement reports is the cause, not a consequence:
// a completion error of its own beats a flushed completion, which beats a
// loop stopped because another failed, whatever order the lanes are in.
func TestFirstErrPrefersTheCause(t *testing.T) {
	ok := csrc.Result{Status: csrc.OK}
	stopped := csrc.Result{Status: csrc.Stopped, QPNum: 1}
	flushed := csrc.Result{Status: csrc.WCError, WCStatus: verbs.WCWRFlushErr, QPNum: 2}
	retry := csrc.Result{Status: csrc.WCError, WCStatus: verbs.WCStatus(12), QPNum: 3}
	timeout := csrc.Result{Status: csrc.Timeout, QPNum: 4}
	for _, tt := range []struct {
		name string
		in   []csrc.Result
		want csrc.Result
		bad  bool
	}{
		{"all ok", []csrc.Result{ok, ok}, csrc.Result{}, false},
		{"flush before its cause", []csrc.Result{ok, flushed, retry}, retry, true},
		{"stopped before a flush", []csrc.Result{stopped, flushed}, flushed, true},
		{"stopped only", []csrc.Result{ok, stopped}, stopped, true},
		{"the first of two causes", []csrc.Result{flushed, timeout, retry}, timeout, true},
	} {
		got, bad := firstErr(tt.in)
		if bad != tt.bad || got != tt.want {
			t.Errorf("%s: firstErr = %+v, %v; want %+v, %v", tt.name, got, bad, tt.want, tt.bad)
		}
	}
}

// A timed run reports at most ceil(duration / interval) intervals, however
// late its loops end; an iteration run has no such bound.
func TestIntervalsBoundedByDuration(t *testing.T) {
	for _, tt := range []struct {
		dur, every time.Duration
		want       int
	}{{2 * time.Second, 500 * time.Millisecond, 4}, {2 * time.Second, 300 * time.Millisecond, 7}, {0, time.Second, 0}, {time.Second, 0, 0}} {
		if got := intervalLimit(Plan{Duration: tt.dur, Interval: tt.every}); got != tt.want {
			t.Errorf("-D %v --interval %v: limit %d, want %d", tt.dur, tt.every, got, tt.want)
		}
	}
	progress := csrc.NewCounter()
	defer progress.Free()
	rep := startIntervals(20*time.Millisecond, 3, 64, progress, nil)
	time.Sleep(150 * time.Millisecond) // seven ticks and a tail
	if got := rep.stop(); len(got) != 3 {
		t.Errorf("%d intervals with a limit of 3: %+v", len(got), got)
	}
	// Without a limit they keep coming: wait for the fourth itself (a busy
	// host may take longer than four ticks), bounded.
	seen := countingObserver{make(chan struct{}, 64)}
	rep = startIntervals(20*time.Millisecond, 0, 64, progress, seen)
	for i := range 4 {
		select {
		case <-seen.intervals:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d intervals of 20 ms ticks without a limit in 10 s", i)
		}
	}
	if got := rep.stop(); len(got) < 4 {
		t.Errorf("%d intervals reported after 4 were observed", len(got))
	}
}

// countingObserver signals each interval it is given.
type countingObserver struct{ intervals chan struct{} }

func (countingObserver) Start(*results.Run) error                    { return nil }
func (countingObserver) Measured(*results.Run, results.Result) error { return nil }
func (countingObserver) End(*results.Run) error                      { return nil }
func (o countingObserver) Interval(int, results.Interval) {
	select {
	case o.intervals <- struct{}{}:
	default:
	}
}

// slowObserver takes its time over each interval, as a terminal or a
// metrics push can.
type slowObserver struct{ delay time.Duration }

func (slowObserver) Start(*results.Run) error                    { return nil }
func (slowObserver) Measured(*results.Run, results.Result) error { return nil }
func (slowObserver) End(*results.Run) error                      { return nil }
func (o slowObserver) Interval(int, results.Interval)            { time.Sleep(o.delay) }

// An interval ends when the counter is read, not when its tick was due:
// behind an observer that takes 60 ms a reading, 20 ms ticks come due
// while it works, and an interval that ended at the due time would count
// the messages of 60 ms over 20.
func TestIntervalEndsAtTheReading(t *testing.T) {
	progress := csrc.NewCounter()
	defer progress.Free()
	rep := startIntervals(20*time.Millisecond, 0, 64, progress, slowObserver{60 * time.Millisecond})
	time.Sleep(400 * time.Millisecond)
	got := rep.stop()
	if len(got) < 3 {
		t.Fatalf("%d intervals in 400 ms", len(got))
	}
	for i, iv := range got[1:] {
		// Each reading comes after the observer's 60 ms for the one before.
		if d := iv.EndS - iv.StartS; d < 0.059 {
			t.Errorf("interval %d spans %.1f ms, but the counter was read at least 60 ms after the one before: %+v", i+1, 1e3*d, got)
		}
	}
}

// A sweep whose later rate fails keeps the rates before it and their knee
// (the failed rate's own samples too, when it has some).
func TestSweepMarksKneeBeforeAFailure(t *testing.T) {
	p99 := map[int]float64{1000: 10, 2000: 15, 4000: 45, 8000: 90}
	pass := func(fail int) func(int) (results.RateSeries, error) {
		return func(rate int) (results.RateSeries, error) {
			s := results.RateSeries{Rate: rate, Iterations: 100, Lat: results.LatencyStats{P99: p99[rate]}}
			if rate == fail {
				return s, errors.New("retry exceeded")
			}
			return s, nil
		}
	}
	for _, tt := range []struct {
		name   string
		fail   int
		want   int // the knee's index
		series int
		failed bool
	}{
		{"all rates", 0, 2, 4, false},
		{"the rate after the knee fails", 8000, 2, 4, true},
		{"the knee's own rate fails", 4000, 2, 3, true},
		{"a rate before the knee fails", 2000, -1, 2, true},
	} {
		out, err := sweepRates([]int{1000, 2000, 4000, 8000}, pass(tt.fail), 10)
		knee := -1
		for i, s := range out {
			if s.Knee {
				knee = i
			}
		}
		if (err != nil) != tt.failed || len(out) != tt.series || knee != tt.want {
			t.Errorf("%s: %d series, knee at %d, err %v; want %d, %d, failed %v", tt.name, len(out), knee, err, tt.series, tt.want, tt.failed)
		}
	}
}

// A rate the path cannot carry ends as its loop returns it, cut behind the
// schedule (csrc.Result.RateCut, status OK): a series with the samples it
// has, not reached, and no error, so the sweep measures the rates after it
// and keeps its knee. One cut with nothing past the warm-up is still a
// series: its achieved rate is the finding.
func TestCutRateIsASeriesNotAFailure(t *testing.T) {
	plan := rbplan.DefaultPlan(ReadLat)
	plan.Warmup, plan.Iterations = 10_000, 100_000
	n := plan.Warmup + plan.Iterations
	// The path answers 50000 requests a second, each in 10 µs idle; a cut
	// loop posted what the path carried until its cut, each answer later
	// than the one before (the backlog).
	const capacity = 50_000
	loop := func(rate int) (csrc.Result, csrc.Params) {
		p := csrc.Params{Samples: make([]uint64, n), SamplesRaw: make([]uint64, n)}
		cut := rate > capacity
		posted, pace := n, rate
		if cut { // n at the path's rate outlasts the cut
			posted = uint64(capacity * (2*float64(n)/float64(rate) + csrc.RateCutGrace.Seconds()))
			pace = capacity
		}
		for i := range posted {
			p.Samples[i], p.SamplesRaw[i] = 10_000, 10_000
			if cut {
				p.Samples[i] += i * uint64(time.Second) / capacity
			}
		}
		span := time.Duration(posted-1) * time.Second / time.Duration(pace)
		return csrc.Result{Status: csrc.OK, Samples: int(posted), Posted: posted, PostSpan: span, RateCut: cut}, p
	}
	pass := func(rate int) (results.RateSeries, error) {
		lanes := make([]rateLane, 2)
		for l := range lanes {
			r, p := loop(rate)
			lanes[l] = rateLaneOf(r, p, plan)
		}
		return rateSeries(rate, lanes)
	}
	out, err := sweepRates([]int{1000, 1_000_000, 20_000_000, 2000}, pass, 10)
	if err != nil {
		t.Fatalf("sweep failed: %v", err)
	}
	if len(out) != 4 {
		t.Fatalf("%d series, want 4 (every rate): %+v", len(out), out)
	}
	for _, s := range out {
		cut := s.Rate > capacity
		if s.Reached == cut {
			t.Errorf("rate %d/s: reached %v (achieved %.0f/s)", s.Rate, s.Reached, s.Achieved)
		}
		if cut && math.Abs(s.Achieved-capacity) > 0.01*capacity {
			t.Errorf("rate %d/s: achieved %.0f/s, want the path's %d/s", s.Rate, s.Achieved, capacity)
		}
	}
	if got := out[1].Iterations; got == 0 || got >= 2*plan.Iterations {
		t.Errorf("1000000/s: %d samples, want those past the warm-up of what was posted", got)
	}
	if out[2].Iterations != 0 || out[2].Hist != nil {
		t.Errorf("20000000/s: %d samples, want none past the warm-up", out[2].Iterations)
	}
	if !out[1].Knee || out[3].Iterations != 2*plan.Iterations {
		t.Errorf("knee %v at 1000000/s, %d samples at 2000/s: want the knee at the cut rate and the rate after it measured", out[1].Knee, out[3].Iterations)
	}
}

// A step's deadline holds every --rate pass at its longest: twice its
// planned span and the grace, after which an overloaded pass is cut.
func TestStepTimeHoldsCutRates(t *testing.T) {
	p := rbplan.DefaultPlan(SendLat)
	p.Warmup, p.Iterations = 1000, 100_000
	base := stepTime(p, 2)
	p.Rates = []int{1000, 1_000_000}
	var want time.Duration
	for _, r := range p.Rates {
		want += 2*time.Duration(p.Warmup+p.Iterations)*time.Second/time.Duration(r) + csrc.RateCutGrace
	}
	if got := stepTime(p, 2) - base; got < want {
		t.Errorf("the rates add %v to the step time, a cut pass may take %v", got, want)
	}
}
