package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/rdmabench/rdmabench/internal/golden"
	"github.com/rdmabench/rdmabench/results"
)

func coll(t *testing.T, name string) Collective {
	t.Helper()
	c, ok := FindCollective(name)
	if !ok {
		t.Fatalf("no collective %s", name)
	}
	return c
}

func TestFindCollective(t *testing.T) {
	for in, want := range map[string]string{"all_reduce": "all_reduce", "allreduce": "all_reduce", "all_reduce_perf": "all_reduce",
		"alltoall_perf": "alltoall", "sendrecv": "sendrecv", "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter"} {
		c, ok := FindCollective(in)
		if !ok || c.Name != want {
			t.Errorf("FindCollective(%q) = %q, %v", in, c.Name, ok)
		}
	}
	if _, ok := FindCollective("gather"); ok {
		t.Error("gather should be unknown")
	}
}

// The counts follow nccl-tests' getCollByteCount.
func TestCounts(t *testing.T) {
	tests := []struct {
		coll              string
		count, nranks, ts int
		want              Counts
	}{
		{"all_reduce", 1024, 4, 4, Counts{Send: 1024, Recv: 1024, Param: 1024}},
		{"all_reduce", 1023, 4, 1, Counts{Send: 1023, Recv: 1023, Param: 1023}},
		{"broadcast", 1024, 4, 4, Counts{Send: 1024, Recv: 1024, Param: 1024}},
		{"reduce", 1024, 4, 4, Counts{Send: 1024, Recv: 1024, Param: 1024}},
		{"sendrecv", 1024, 4, 4, Counts{Send: 1024, Recv: 1024, Param: 1024}},
		{"all_gather", 1024, 4, 4, Counts{Send: 256, Recv: 1024, Param: 256, SendInplace: 256}},
		// A rank's share is trimmed to 16 bytes: all_gather_perf -b 40 -d float on 4 ranks.
		{"all_gather", 10, 4, 4, Counts{Send: 0, Recv: 0, Param: 0, SendInplace: 0}},
		{"all_gather", 30, 2, 4, Counts{Send: 12, Recv: 24, Param: 12, SendInplace: 12}},
		{"all_gather", 30, 2, 8, Counts{Send: 14, Recv: 28, Param: 14, SendInplace: 14}},
		{"all_gather", 100, 3, 1, Counts{Send: 32, Recv: 96, Param: 32, SendInplace: 32}},
		{"reduce_scatter", 1024, 4, 4, Counts{Send: 1024, Recv: 256, Param: 256, RecvInplace: 256}},
		{"reduce_scatter", 1000, 3, 2, Counts{Send: 984, Recv: 328, Param: 328, RecvInplace: 328}},
		{"alltoall", 1024, 4, 4, Counts{Send: 1024, Recv: 1024, Param: 256}},
		{"alltoall", 2, 4, 4, Counts{Send: 0, Recv: 0, Param: 0}},
		{"alltoall", 66, 3, 4, Counts{Send: 60, Recv: 60, Param: 20}},
	}
	for _, tc := range tests {
		if got := coll(t, tc.coll).Counts(tc.count, tc.nranks, tc.ts); got != tc.want {
			t.Errorf("%s count %d n %d: got %+v, want %+v", tc.coll, tc.count, tc.nranks, got, tc.want)
		}
	}
}

// algbw and busbw as nccl-tests computes them.
func TestBandwidth(t *testing.T) {
	const sec = 1e-3
	tests := []struct {
		coll         string
		param, ts, n int
		algbw, busbw float64
	}{
		{"all_reduce", 1 << 20, 4, 8, 4.194304, 4.194304 * 2 * 7 / 8},
		{"all_reduce", 1 << 20, 4, 1, 4.194304, 0},
		{"all_gather", 1 << 18, 4, 4, 4.194304, 4.194304 * 3 / 4},
		{"reduce_scatter", 1 << 18, 4, 4, 4.194304, 4.194304 * 3 / 4},
		{"alltoall", 1 << 18, 4, 4, 4.194304, 4.194304 * 3 / 4},
		{"broadcast", 1 << 20, 4, 4, 4.194304, 4.194304},
		{"reduce", 1 << 20, 4, 4, 4.194304, 4.194304},
		{"sendrecv", 1 << 20, 4, 2, 4.194304, 4.194304},
	}
	for _, tc := range tests {
		a, b := coll(t, tc.coll).Bandwidth(tc.param, tc.ts, sec, tc.n)
		if math.Abs(a-tc.algbw) > 1e-9 || math.Abs(b-tc.busbw) > 1e-9 {
			t.Errorf("%s n=%d: algbw %g busbw %g, want %g %g", tc.coll, tc.n, a, b, tc.algbw, tc.busbw)
		}
	}
}

func TestSizes(t *testing.T) {
	tests := []struct {
		min, max, step, factor int
		want                   []int
	}{
		{8, 128, 0, 2, []int{8, 16, 32, 64, 128}},
		{8, 100, 0, 2, []int{8, 16, 32, 64}},
		{100, 400, 100, 1, []int{100, 200, 300, 400}},
		{32 << 20, 32 << 20, 1 << 20, 1, []int{32 << 20}},
		{0, 8, 0, 2, []int{0}},
	}
	for _, tc := range tests {
		got, err := Sizes(tc.min, tc.max, tc.step, tc.factor)
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("Sizes%v = %v, %v; want %v", []int{tc.min, tc.max, tc.step, tc.factor}, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("Sizes%v = %v; want %v", []int{tc.min, tc.max, tc.step, tc.factor}, got, tc.want)
				break
			}
		}
	}
	if _, err := Sizes(16, 8, 1, 2); err == nil {
		t.Error("max < min accepted")
	}
	if _, err := Sizes(8, 16, 0, 1); err == nil {
		t.Error("zero step accepted")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"8": 8, "128M": 128 << 20, "1G": 1 << 30, "64k": 64 << 10, "1.5K": 1536, "0": 0} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "-1", "12X", "1 2"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func TestParseTypesOps(t *testing.T) {
	if ts, err := ParseTypes("all"); err != nil || len(ts) != 10 {
		t.Errorf("all types: %v %v", ts, err)
	}
	if ts, err := ParseTypes("bf16"); err != nil || ts[0].Name != "bfloat16" || ts[0].Code != 9 {
		t.Errorf("bf16: %v %v", ts, err)
	}
	if _, err := ParseTypes("float128"); err == nil {
		t.Error("float128 accepted")
	}
	if ops, err := ParseOps("all"); err != nil || len(ops) != 5 {
		t.Errorf("all ops: %v %v", ops, err)
	}
	if ops, err := ParseOps("min"); err != nil || ops[0].Code != 3 {
		t.Errorf("min: %v %v", ops, err)
	}
	if _, err := ParseOps("mulsum"); err == nil {
		t.Error("mulsum accepted")
	}
}

func TestFloatStr(t *testing.T) {
	tests := []struct {
		v     float64
		width int
		want  string
	}{
		{0, 7, "   0.00"},
		{12.345, 7, "  12.35"},
		{1234.5, 7, "1234.50"},
		{12345.6, 7, "12345.6"},
		{123456.7, 7, " 123457"},
		{12345678, 7, "1.2e+07"},
		{0.5, 6, "  0.50"},
		{389.99, 6, "389.99"},
		{1234.5, 6, "1234.5"},
		{123456, 6, "123456"},
		{1234567, 6, " 1e+06"},
	}
	for _, tc := range tests {
		if got := FloatStr(tc.v, tc.width); got != tc.want {
			t.Errorf("FloatStr(%g, %d) = %q, want %q", tc.v, tc.width, got, tc.want)
		}
	}
}

func TestPutGetRoundTrip(t *testing.T) {
	for _, ty := range Types {
		buf := make([]byte, 4*ty.Size)
		vals := []float64{0, 1, 96, 2}
		for i, v := range vals {
			put(buf, ty, i, v)
		}
		for i, v := range vals {
			if got := get(buf, ty, i); got != v {
				t.Errorf("%s: element %d = %g, want %g", ty.Name, i, got, v)
			}
		}
	}
	if h := f32ToHalf(1.5); h != 0x3e00 || halfToF32(h) != 1.5 {
		t.Errorf("half 1.5 = %#x", h)
	}
	if b := f32ToBf16(-2); b != 0xc000 {
		t.Errorf("bf16 -2 = %#x", b)
	}
	if halfToF32(0x0001) <= 0 || halfToF32(0x8001) >= 0 {
		t.Error("half subnormal sign")
	}
}

func typ(t *testing.T, name string) Type {
	ts, err := ParseTypes(name)
	if err != nil {
		t.Fatal(err)
	}
	return ts[0]
}

// simulate computes a collective's results from the inputs directly, to
// check Expected against an independent path.
func simulate(k Case) [][]float64 {
	n := k.NRanks
	in := make([][]float64, n)
	for r := range in {
		b := k.Input(r)
		for i := 0; i < k.C.Send; i++ {
			in[r] = append(in[r], get(b, k.Type, i))
		}
	}
	red := func(j int) float64 {
		acc := in[0][j]
		for r := 1; r < n; r++ {
			v := in[r][j]
			switch k.Op {
			case "sum", "avg":
				acc += v
			case "prod":
				acc *= v
			case "max":
				acc = math.Max(acc, v)
			case "min":
				acc = math.Min(acc, v)
			}
		}
		if k.Op == "avg" {
			acc /= float64(n)
			if !isFloat(k.Type) {
				acc = math.Trunc(acc)
			}
		}
		return acc
	}
	out := make([][]float64, n)
	p := k.C.Param
	for r := 0; r < n; r++ {
		for i := 0; i < k.C.Recv; i++ {
			var v float64
			switch k.Coll.Name {
			case "all_reduce", "reduce":
				v = red(i)
			case "reduce_scatter":
				v = red(r*p + i)
			case "all_gather":
				v = in[i/p][i%p]
			case "broadcast":
				v = in[k.Root][i]
			case "alltoall":
				v = in[i/p][r*p+i%p]
			case "sendrecv":
				v = in[(r-1+n)%n][i]
			}
			out[r] = append(out[r], v)
		}
	}
	return out
}

func TestExpectedMatchesSimulation(t *testing.T) {
	for _, c := range Collectives {
		for _, n := range []int{1, 2, 3, 4} {
			for _, tn := range []string{"int8", "uint8", "int32", "float", "half", "bfloat16", "double", "uint64"} {
				ops := []OpName{""}
				if c.HasOp {
					ops = []OpName{OpSum, OpProd, OpMax, OpMin, OpAvg}
				}
				for _, op := range ops {
					ty := typ(t, tn)
					k := Case{Coll: c, Type: ty, Op: op, Root: n - 1, NRanks: n, C: c.Counts(48, n, ty.Size)}
					sim := simulate(k)
					for r := 0; r < n; r++ {
						want := k.Expected(r, false)
						if c.Name == "reduce" && r != k.Root {
							// Untouched: zeros out of place, the input in place.
							if k.Wrong(make([]byte, k.C.Recv*ty.Size), want) != 0 || !bytes.Equal(k.Expected(r, true), k.Input(r)) {
								t.Errorf("reduce: non-root %d must expect its buffer unchanged", r)
							}
							continue
						}
						got := make([]byte, len(want))
						for i, v := range sim[r] {
							put(got, ty, i, v)
						}
						if w := k.Wrong(got, want); w != 0 {
							t.Errorf("%s n=%d %s %s rank %d: %d wrong", c.Name, n, tn, op, r, w)
						}
					}
				}
			}
		}
	}
}

func TestWrongCounts(t *testing.T) {
	k := Case{Coll: coll(t, "all_reduce"), Type: typ(t, "float"), Op: "sum", NRanks: 2, C: Counts{Send: 8, Recv: 8, Param: 8}}
	want := k.Expected(0, false)
	got := append([]byte{}, want...)
	if w := k.Wrong(got, want); w != 0 {
		t.Fatalf("identical buffers: %d wrong", w)
	}
	put(got, k.Type, 3, 1000)
	put(got, k.Type, 5, math.NaN())
	if w := k.Wrong(got, want); w != 2 {
		t.Errorf("2 corrupted elements: %d wrong", w)
	}
	put(got, k.Type, 3, get(want, k.Type, 3)+1e-7) // below float's resolution at this value
	if w := k.Wrong(got, want); w != 1 {
		t.Errorf("rounding counted as wrong: %d", w)
	}
	ki := Case{Coll: k.Coll, Type: typ(t, "int32"), Op: "sum", NRanks: 2, C: k.C}
	wi := ki.Expected(1, false)
	gi := append([]byte{}, wi...)
	gi[0]++
	if w := ki.Wrong(gi, wi); w != 1 {
		t.Errorf("int off by one: %d wrong", w)
	}
}

func sampleRun() *results.NCCLRun {
	r := &results.NCCLRun{
		Tool: "ncclbench", NotGPU: true, NCCLVersion: "2.29.1", NCCLLibrary: "/x/libnccl.so.2", CudartLibrary: "/x/libnccl.so.2",
		Config: results.NCCLConfig{Collective: "all_reduce", NThreads: 1, NGpus: 1, NProcs: 2, NRanks: 2, MinBytes: 8, MaxBytes: 1 << 20,
			StepFactor: 2, Warmup: 5, Iters: 20, AggIters: 1, Check: 1, Average: 1},
		Devices: []results.NCCLDevice{
			{Rank: 0, Pid: 100, Host: "node1", Device: 0, BusID: "0000:07:00.0", Name: "NVIDIA H100 80GB HBM3"},
			{Rank: 1, Pid: 101, Host: "node2", Device: 0, BusID: "0000:07:00.0", Name: "NVIDIA H100 80GB HBM3"},
		},
	}
	c := Collectives[0]
	for _, p := range []struct {
		size int
		us   float64
	}{{8, 12.5}, {1 << 20, 45.67}, {128 << 20, 2890.1}} {
		cnt := c.Counts(p.size/4, 2, 4)
		a, b := c.Bandwidth(cnt.Param, 4, p.us/1e6, 2)
		x := results.NCCLResult{TimeUs: p.us, AlgBW: a, BusBW: b, Checked: true}
		y := x
		y.Checked = p.size != 8
		r.Results = append(r.Results, results.NCCLPoint{Size: p.size, Count: cnt.Param, Type: "float", Redop: "sum", Root: -1, OutOfPlace: x, InPlace: y})
	}
	r.Results[1].InPlace.Wrong = 3
	r.Summarize()
	return r
}

func TestReportGolden(t *testing.T) {
	r := sampleRun()
	if r.OutOfBounds != 1 {
		t.Errorf("OutOfBounds = %d, want 1", r.OutOfBounds)
	}
	var b bytes.Buffer
	WriteHeader(&b, r)
	for _, p := range r.Results {
		WritePoint(&b, p)
	}
	WriteFooter(&b, r, Collectives[0])
	golden.Check(t, "report.golden", b.Bytes())

	j, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back results.NCCLRun
	if err := json.Unmarshal(j, &back); err != nil || len(back.Results) != 3 || !back.NotGPU {
		t.Errorf("JSON round trip: %v %+v", err, back)
	}
}

// Sums, max and min are exact in every type up to 4096 ranks and beyond
// (sums of the inputs stay within the type's exact integers), and the
// reference itself is exact; a result off by one unit is wrong.
func TestExactAtScale(t *testing.T) {
	for _, n := range []int{85, 86, 683, 4096} {
		for _, tn := range []string{"bfloat16", "half", "float", "int8", "uint8"} {
			ty := typ(t, tn)
			k := Case{Coll: coll(t, "all_reduce"), Type: ty, Op: "sum", NRanks: n, C: Counts{Send: n + 16, Recv: n + 16, Param: n + 16}}
			want := k.Expected(0, false)
			for i := 0; i < k.C.Recv; i++ {
				var sum int64
				nz := 0
				for r := 0; r < n; r++ {
					v := value(ty, r, i, true, "sum", n)
					sum += v
					if v != 0 {
						nz++
					}
				}
				if isFloat(ty) && sum > exactInts(ty) {
					t.Fatalf("%s n=%d element %d: sum %d beyond exact integers", tn, n, i, sum)
				}
				if nz != contributors(ty, n) || nz == 0 {
					t.Fatalf("%s n=%d element %d: %d contributors", tn, n, i, nz)
				}
				if g := get(want, ty, i); g != float64(wrap(ty, sum)) {
					t.Fatalf("%s n=%d element %d: expected %g, exact %d", tn, n, i, g, wrap(ty, sum))
				}
			}
			// Every rank contributes somewhere.
			for r := 0; r < n; r++ {
				seen := false
				for i := 0; i < k.C.Send && !seen; i++ {
					seen = value(ty, r, i, true, "sum", n) != 0
				}
				if !seen {
					t.Fatalf("%s n=%d: rank %d never contributes", tn, n, r)
				}
			}
			got := append([]byte{}, want...)
			put(got, ty, 1, get(want, ty, 1)+1)
			if w := k.Wrong(got, want); w != 1 {
				t.Errorf("%s n=%d: an element off by one counted %d wrong", tn, n, w)
			}
		}
	}
}

// Avg may round: the tolerance follows the type and the number of ranks
// adding non-zero terms, and the worst case NCCL can produce (each term
// x/n rounded, then summed in order with rounding) stays inside it.
func TestAvgTolerance(t *testing.T) {
	for _, n := range []int{2, 7, 85, 1000, 4096} {
		for _, tn := range []string{"bfloat16", "half", "float", "double"} {
			ty := typ(t, tn)
			k := Case{Coll: coll(t, "all_reduce"), Type: ty, Op: "avg", NRanks: n, C: Counts{Send: n, Recv: n, Param: n}}
			want := k.Expected(0, false)
			got := make([]byte, len(want))
			round := func(v float64) float64 {
				b := make([]byte, ty.Size)
				put(b, ty, 0, v)
				return get(b, ty, 0)
			}
			for i := 0; i < k.C.Recv; i++ {
				acc := 0.0
				for r := 0; r < n; r++ { // premultiplied sum, rounded at every step
					acc = round(acc + round(float64(value(ty, r, i, true, "avg", n))/float64(n)))
				}
				put(got, ty, i, acc)
			}
			if w := k.Wrong(got, want); w != 0 {
				t.Errorf("%s n=%d: %d rounded averages counted wrong", tn, n, w)
			}
			put(got, ty, 0, get(want, ty, 0)*1.5)
			if w := k.Wrong(got, want); w != 1 {
				t.Errorf("%s n=%d: an average 50%% off counted %d wrong", tn, n, w)
			}
		}
	}
}
