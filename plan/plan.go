// Package plan is what a measurement asks for: the plan a client sends
// whole to its server, its defaults, its limits and its validation, and
// message-size parsing. Plain Go without cgo, so that the validator and its
// fuzz targets build anywhere (CGO_ENABLED=0); engine/ runs plans.
package plan

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rdmabench/rdmabench/results"
)

// Limits on what a plan may ask for; a server enforces them on plans it is sent.
const (
	MaxMessageSize = 8 << 20 // rxe's and many HCAs' max_msg_sz
	MaxIterations  = 1 << 32
	MaxDuration    = 24 * time.Hour
	MaxDepth       = 1 << 16
	MaxSizes       = 64
	MaxQPs         = 1024
	MaxThreads     = 256
	MaxPostList    = 64
)

// Plan is everything a measurement needs; the client sends it whole, so the
// server needs no matching flags.
type Plan struct {
	Test       results.Test  `json:"test"`
	Sizes      []int         `json:"sizes"`
	Iterations uint64        `json:"iterations"` // per size; ignored in duration mode
	Duration   time.Duration `json:"duration"`   // 0: iteration mode
	TxDepth    int           `json:"tx_depth"`
	RxDepth    int           `json:"rx_depth"`
	CQMod      int           `json:"cq_mod"`
	Inline     int           `json:"inline"` // bytes; messages up to this size go inline
	MTU        int           `json:"mtu"`    // 0: the port's active MTU
	SL         int           `json:"sl"`
	TC         int           `json:"tc"`
	// QPTimeout is the local ACK timeout exponent (4.096 µs × 2^QPTimeout),
	// perftest's -u; 0 (a plan from a client without the field) means 14.
	QPTimeout int           `json:"qp_timeout,omitempty"`
	Warmup    uint64        `json:"warmup"`  // iterations before measuring (iteration mode)
	Timeout   time.Duration `json:"timeout"` // per measurement step

	Transport results.Transport `json:"transport"` // RC, UC or UD
	// QPs lists the QP counts to measure (a sweep when more than one); the
	// connection holds the largest. Latency tests run one ping-pong per QP.
	QPs           []int            `json:"qps"`
	Threads       int              `json:"threads"`   // client threads; the server uses as many
	SharedCQ      bool             `json:"shared_cq"` // one CQ for all threads instead of one each
	Bidirectional bool             `json:"bidirectional"`
	Imm           bool             `json:"imm"`       // WRITE_WITH_IMM / SEND_WITH_IMM
	Atomic        results.AtomicOp `json:"atomic"`    // FETCH_AND_ADD or CMP_AND_SWAP
	PostList      int              `json:"post_list"` // requests per ibv_post_send
	Verify        bool             `json:"verify"`
	ShareCPUs     bool             `json:"share_cpus"` // allow more loop threads than pinned CPUs
	Interval      time.Duration    `json:"interval"`   // client-side reports; not sent to the loops
	// Memory is where the client's buffers live, PeerMemory the server's
	// (the loopback peer's): host memory on the NIC's NUMA node unless they
	// say otherwise. Left out of the wire when zero, so a plan without them
	// reads as before.
	Memory     MemorySpec `json:"memory,omitzero"`
	PeerMemory MemorySpec `json:"peer_memory,omitzero"`
	// Rates (--rate) are open-loop send rates, requests per second per QP,
	// each measured after the idle (closed-loop) ping-pong of a size with
	// TxDepth requests in flight at most. Left out of the wire when empty,
	// so a plan without them reads as before.
	Rates []int `json:"rates,omitempty"`
	// Loads (--load) are bandwidth plans run on QPs of their own to the
	// same peer while the ping-pong runs a second time (loaded), one size
	// and QP count each; the server opens them from the plan.
	Loads []Plan `json:"loads,omitempty"`
}

// MaxRate bounds --rate: 100 million requests a second per QP is beyond any
// NIC's message rate, so a higher figure is a typo.
const MaxRate = 100_000_000

// RateMode reports whether the plan measures open-loop rates (--rate).
func (p Plan) RateMode() bool { return len(p.Rates) > 0 }

// LatencyRecvs is the receives a ping-pong keeps posted per QP: SEND's peer
// sends only after it has received, so one in flight and one spare; with
// --rate, one for each request in flight and two spare.
func (p Plan) LatencyRecvs() int {
	if p.Test != results.SendLat && !p.WriteLatByCompletion() {
		return 0
	}
	if p.RateMode() {
		return p.TxDepth + 2
	}
	return 2
}

func (p Plan) validateRates() error {
	if !p.RateMode() {
		return nil
	}
	switch {
	case !p.Test.IsLatency():
		return errors.New("--rate applies to latency tests")
	case p.Transport != results.RC:
		return fmt.Errorf("--rate needs RC (answers matched to requests in order), not %s", p.Transport)
	case p.Duration > 0:
		return errors.New("--rate sends -n requests at each rate: no -D")
	case len(p.Rates) > MaxSizes:
		return fmt.Errorf("%d rates (want at most %d)", len(p.Rates), MaxSizes)
	case p.TxDepth > MaxRateWindow:
		return fmt.Errorf("--rate keeps at most %d requests in flight (-t %d)", MaxRateWindow, p.TxDepth)
	case p.Iterations+p.Warmup > MaxLatencySamples:
		return fmt.Errorf("--rate measures at most %d requests a rate (-n plus --warmup)", MaxLatencySamples)
	}
	for _, r := range p.Rates {
		if r < 1 || r > MaxRate {
			return fmt.Errorf("rate %d outside 1..%d requests per second", r, MaxRate)
		}
	}
	return nil
}

// MemorySpec says where one side's buffers live.
type MemorySpec struct {
	// GPU (--use-cuda) is a device index or PCI bus id; "" is host memory.
	GPU string `json:"gpu,omitempty"`
	// Dmabuf (--use-dmabuf) requires dma-buf registration: no fallback to
	// peer memory.
	Dmabuf bool `json:"dmabuf,omitempty"`
	// Node (--mem-node) is the NUMA node for host memory; nil: the NIC's.
	Node *int `json:"node,omitempty"`
	// HugePages (--hugepages) maps host memory in 2 MiB pages.
	HugePages bool `json:"hugepages,omitempty"`
}

// OnGPU reports whether the buffers are GPU memory.
func (m MemorySpec) OnGPU() bool { return m.GPU != "" }

func (m MemorySpec) validate(who string) error {
	if m.GPU != "" {
		if err := ValidGPU(m.GPU); err != nil {
			return fmt.Errorf("%s: %w", who, err)
		}
		if m.Node != nil || m.HugePages {
			return fmt.Errorf("%s: --mem-node and --hugepages place host memory, not GPU %s's", who, m.GPU)
		}
	} else if m.Dmabuf {
		return fmt.Errorf("%s memory: --use-dmabuf registers GPU memory: give --use-cuda too", who)
	}
	if m.Node != nil && (*m.Node < 0 || *m.Node >= 1024) {
		return fmt.Errorf("%s memory: NUMA node %d outside 0..1023", who, *m.Node)
	}
	return nil
}

// DeviceMemory reports whether either side's buffers are GPU memory. Both
// sides then verify a fixed pattern (see csrc's fixed_pattern), and
// write-lat sees the peer's WRITE by its completion, not in memory.
func (p Plan) DeviceMemory() bool { return p.Memory.OnGPU() || p.PeerMemory.OnGPU() }

// WriteLatByCompletion: a write-lat side on GPU memory cannot spin on the
// last byte of its buffer (the CPU cannot read it), so every write-lat of
// such a plan is a WRITE_WITH_IMM ping-pong whose arrival is the receive
// completion, on both sides alike.
// --rate does the same: with several WRITEs in flight, a tag spun on in
// memory could be overwritten by the next before it is seen.
func (p Plan) WriteLatByCompletion() bool {
	return p.Test == results.WriteLat && (p.DeviceMemory() || p.RateMode())
}

// CapSignalBytes lowers CQMod so that one signalled completion covers about
// bytes of the first size or fewer. Figures counted from signalled
// completions inside a short window (a mesh direction, a load during a
// loaded ping-pong) then still see some on a slow path; on a fast one the
// extra signals cost nothing.
func (p *Plan) CapSignalBytes(bytes int) {
	if len(p.Sizes) > 0 {
		p.CQMod = max(1, min(p.CQMod, bytes/max(1, p.Sizes[0])))
	}
}

// MaxQPs is the largest QP count of the plan: what the connection holds.
func (p Plan) MaxQPs() int {
	m := 1
	for _, q := range p.QPs {
		m = max(m, q)
	}
	return m
}

// QPCounts is the sweep list, [1] by default.
func (p Plan) QPCounts() []int {
	if len(p.QPs) == 0 {
		return []int{1}
	}
	return p.QPs
}

// Measurements is how many results the plan yields: a size at a QP count.
func (p Plan) Measurements() int { return len(p.Sizes) * len(p.QPCounts()) }

// DefaultTimeout bounds each step of a measurement (connect, each size)
// unless --timeout says otherwise; a step's bytes add to it (engine's
// stepTime).
const DefaultTimeout = 120 * time.Second

// DefaultInline is perftest's default inline size for a test: the largest
// message sent inline in latency tests (SEND over RC and UC 236 bytes, over
// UD 188; WRITE 220), none in bandwidth tests. The device may grant less;
// the header says what was used.
func DefaultInline(t results.Test, tr results.Transport) int {
	switch t {
	case results.SendLat:
		if tr == results.UD {
			return 188
		}
		return 236
	case results.WriteLat:
		return 220
	}
	return 0
}

// DefaultPlan is perftest's defaults for a test, over RC.
func DefaultPlan(t results.Test) Plan {
	p := Plan{Test: t, Sizes: []int{65536}, Iterations: 5000, TxDepth: 128, RxDepth: 512, CQMod: 100, Timeout: DefaultTimeout,
		Inline: DefaultInline(t, results.RC)}
	if t.IsLatency() {
		p.Sizes = []int{2}
		p.Iterations = 1000
		p.TxDepth = 1
		p.RxDepth = 1
	}
	p.Warmup = p.Iterations / 10
	p.Transport, p.QPs, p.Threads, p.PostList = results.RC, []int{1}, 1, 1
	if t == results.AtomicBW || t == results.AtomicLat {
		p.Sizes, p.Atomic = []int{8}, results.FetchAndAdd
	}
	return p
}

// AllSizes is -a: powers of two from 2 bytes to 8 MiB.
func AllSizes() []int {
	var s []int
	for n := 2; n <= MaxMessageSize; n *= 2 {
		s = append(s, n)
	}
	return s
}

// MaxSize is the largest message in the plan.
func (p Plan) MaxSize() int {
	m := 0
	for _, s := range p.Sizes {
		m = max(m, s)
	}
	return m
}

// Validate checks a plan from a user or from the wire.
func (p Plan) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !p.Test.Valid() {
		bad("unknown test %q", p.Test)
	}
	if len(p.Sizes) == 0 || len(p.Sizes) > MaxSizes {
		bad("%d message sizes (want 1 to %d)", len(p.Sizes), MaxSizes)
	}
	for _, s := range p.Sizes {
		if s < 1 || s > MaxMessageSize {
			bad("message size %d outside 1..%d", s, MaxMessageSize)
		}
	}
	if p.Duration == 0 && (p.Iterations < 1 || p.Iterations > MaxIterations) {
		bad("iterations %d outside 1..%d", p.Iterations, uint64(MaxIterations))
	}
	if p.Duration < 0 || p.Duration > MaxDuration {
		bad("duration %v outside 0..%v", p.Duration, MaxDuration)
	}
	if p.TxDepth < 1 || p.TxDepth > MaxDepth || p.RxDepth < 1 || p.RxDepth > MaxDepth {
		bad("queue depths tx %d rx %d outside 1..%d", p.TxDepth, p.RxDepth, MaxDepth)
	}
	if p.CQMod < 1 || p.CQMod > MaxDepth {
		bad("CQ moderation %d outside 1..%d", p.CQMod, MaxDepth)
	}
	if p.Inline < 0 || p.Inline > 4096 {
		bad("inline size %d outside 0..4096", p.Inline)
	}
	switch p.MTU {
	case 0, 256, 512, 1024, 2048, 4096:
	default:
		bad("MTU %d (want 256, 512, 1024, 2048 or 4096)", p.MTU)
	}
	if p.SL < 0 || p.SL > 15 {
		bad("service level %d outside 0..15", p.SL)
	}
	if p.TC < 0 || p.TC > 255 {
		bad("traffic class %d outside 0..255", p.TC)
	}
	if p.QPTimeout < 0 || p.QPTimeout > 31 {
		bad("QP timeout %d outside 1..31 (4.096 µs × 2^N)", p.QPTimeout)
	}
	if p.Timeout <= 0 || p.Timeout > MaxDuration {
		bad("timeout %v outside (0, %v]", p.Timeout, MaxDuration)
	}
	if p.Warmup > MaxIterations {
		bad("warm-up %d iterations too many", p.Warmup)
	}
	errs = append(errs, p.validateConcurrency(), p.validateOperation(),
		p.Memory.validate("--use-cuda"), p.PeerMemory.validate("--peer-use-cuda"), p.validateRates(), p.validateLoads())
	return errors.Join(errs...)
}

// ParseSize reads a message size with an optional K, M or G suffix (powers of 1024).
func ParseSize(s string) (int, error) {
	digits, mult := splitUnit(s)
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("bad size %q (want a positive number with an optional K or M suffix)", s)
	}
	if n > MaxMessageSize/mult {
		return 0, fmt.Errorf("size %q exceeds %d bytes", s, MaxMessageSize)
	}
	return int(n * mult), nil
}

// splitUnit splits "64K", "2MiB" or "3gb" into its digits and the binary
// multiplier of its K, M, G or T suffix (1 without one).
func splitUnit(s string) (digits string, mult int64) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult = 1
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	return t, mult
}

// ParseBytes reads a byte count with an optional K, M, G or T suffix (powers
// of 1024), for budgets.
func ParseBytes(s string) (int64, error) {
	digits, mult := splitUnit(s)
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 1 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad byte count %q (want a positive number with an optional K, M, G or T suffix)", s)
	}
	return n * mult, nil
}

func (p Plan) validateConcurrency() error {
	var errs []error
	for _, q := range p.QPCounts() {
		if q < 1 || q > MaxQPs {
			errs = append(errs, fmt.Errorf("QP count %d outside 1..%d", q, MaxQPs))
		}
	}
	if p.Threads < 1 || p.Threads > MaxThreads {
		errs = append(errs, fmt.Errorf("threads %d outside 1..%d", p.Threads, MaxThreads))
	}
	if p.PostList < 1 || p.PostList > MaxPostList {
		errs = append(errs, fmt.Errorf("post list %d outside 1..%d", p.PostList, MaxPostList))
	} else if p.PostList > p.TxDepth {
		errs = append(errs, fmt.Errorf("post list %d exceeds the tx depth %d", p.PostList, p.TxDepth))
	}
	if p.Test.IsLatency() && (len(p.QPs) > 1 || p.Bidirectional || p.PostList > 1) {
		errs = append(errs, fmt.Errorf("latency tests take one QP count (one ping-pong each), no -b and no post lists"))
	}
	if p.Test.IsLatency() && p.SharedCQ {
		errs = append(errs, fmt.Errorf("--shared-cq applies to bandwidth tests: each ping-pong polls its own CQ"))
	}
	if p.Interval < 0 || (p.Interval > 0 && p.Interval < 10*time.Millisecond) {
		errs = append(errs, fmt.Errorf("interval %v: want at least 10ms", p.Interval))
	}
	return errors.Join(errs...)
}

func (p Plan) validateOperation() error {
	op := p.Test.Op()
	switch p.Transport {
	case results.RC:
	case results.UC:
		if op != results.OpSend && op != results.OpWrite {
			return fmt.Errorf("UC carries SEND and RDMA WRITE only, not %s", op)
		}
	case results.UD:
		if op != results.OpSend {
			return fmt.Errorf("UD carries SEND only, not %s", op)
		}
		if p.Verify {
			return errors.New("--verify needs a reliable or connected transport (RC, UC), not UD")
		}
	default:
		return fmt.Errorf("transport %q (want RC, UC or UD)", p.Transport)
	}
	if p.Imm && op != results.OpSend && op != results.OpWrite {
		return fmt.Errorf("immediate data goes with SEND and RDMA WRITE, not %s", op)
	}
	if op == results.OpAtomic {
		if p.Atomic != results.FetchAndAdd && p.Atomic != results.CmpAndSwap {
			return fmt.Errorf("atomic %q (want %s or %s)", p.Atomic, results.FetchAndAdd, results.CmpAndSwap)
		}
		for _, s := range p.Sizes {
			if s != 8 {
				return fmt.Errorf("atomics move 8 bytes, not %d", s)
			}
		}
		if p.Verify {
			return errors.New("--verify applies to send, write and read")
		}
	}
	if p.Verify && p.Test.IsLatency() {
		return errors.New("--verify applies to bandwidth tests")
	}
	return nil
}

// MaxLoads bounds --load: each is a side of its own (device context, QPs,
// memory) on both ends.
const MaxLoads = 4

// validateLoads checks the background loads (--load) of a latency plan.
func (p Plan) validateLoads() error {
	if len(p.Loads) == 0 {
		return nil
	}
	switch {
	case !p.Test.IsLatency():
		return errors.New("--load applies to latency tests")
	case len(p.Loads) > MaxLoads:
		return fmt.Errorf("%d loads (want at most %d)", len(p.Loads), MaxLoads)
	case p.RateMode():
		return errors.New("--load and --rate: one at a time")
	case p.Duration > 0:
		return errors.New("--load runs -n ping-pongs idle, then -n loaded: no -D")
	}
	var errs []error
	for i, l := range p.Loads {
		switch {
		case l.Test.IsLatency():
			errs = append(errs, fmt.Errorf("load %d: %s is not a bandwidth test", i+1, l.Test))
		case len(l.Loads) > 0 || l.RateMode():
			errs = append(errs, fmt.Errorf("load %d: a load has no loads or rates of its own", i+1))
		case len(l.Sizes) != 1 || len(l.QPs) != 1 || l.Bidirectional || l.Verify || l.Interval > 0 || l.Duration > 0:
			errs = append(errs, fmt.Errorf("load %d: one size and one QP count, no -b, --verify, --interval or -D (it runs as long as the loaded ping-pong)", i+1))
		default:
			if err := l.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("load %d (%s): %w", i+1, LoadLabel(l), err))
			}
		}
	}
	return errors.Join(errs...)
}

// LoadLabel names a load as its SPEC would: test, size, QPs.
func LoadLabel(l Plan) string {
	var b strings.Builder
	b.WriteString(l.Test.Command())
	if len(l.Sizes) == 1 {
		fmt.Fprintf(&b, " -s %d", l.Sizes[0])
	}
	if q := l.MaxQPs(); q > 1 {
		fmt.Fprintf(&b, " -q %d", q)
	}
	return b.String()
}

// MaxRateWindow is the most requests an open-loop (--rate) ping-pong keeps
// in flight (TxDepth); csrc's LatRate holds that many.
const MaxRateWindow = 1024

// MaxLatencySamples bounds the ping-pongs one measurement keeps (32 MiB of
// samples) in iteration mode.
const MaxLatencySamples = 4 << 20

// busIDPattern is a PCI address as CUDA prints it, with or without the domain.
var busIDPattern = regexp.MustCompile(`^([0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)

// ValidGPU checks a --use-cuda value: a device index or a PCI bus id.
func ValidGPU(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 1023 {
			return fmt.Errorf("GPU index %d outside 0..1023", n)
		}
		return nil
	}
	if !busIDPattern.MatchString(s) {
		return fmt.Errorf("GPU %q: want a device index (0, 1, ...) or a PCI bus id (0000:3b:00.0)", s)
	}
	return nil
}
