package bench

import (
	"encoding/binary"
	"math"
)

// Test data is a pure function of (rank, element index), small integers
// chosen so that every reduction but avg is exact in every type, at any
// number of ranks, whatever order NCCL adds in. The data movers use 0..96,
// which fits int8. Prod uses a single 2 per element among 1s. Sum, max and
// min use 1..3 from `contributors` ranks per element and 0 from the others
// (a rotating window, so every rank contributes when there are at least
// nranks elements), so no partial sum leaves the type's exact integers
// (256 in bfloat16, 2048 in half). Integers wrap the same in any order.
func value(t Type, rank, i int, reducing bool, op OpName, nranks int) int64 {
	if !reducing {
		return int64((i*7 + rank*13) % 97)
	}
	if op == OpProd {
		if (i+rank)%nranks == 0 {
			return 2
		}
		return 1
	}
	if (i+rank)%nranks >= contributors(t, nranks) {
		return 0
	}
	return int64((i*7+rank*13)%3 + 1)
}

// exactInts is how far t represents every integer (partial sums of
// non-negative values stay below their total).
func exactInts(t Type) int64 {
	switch t.Name {
	case "bfloat16":
		return 1 << 8
	case "half":
		return 1 << 11
	case "float":
		return 1 << 24
	case "double":
		return 1 << 53
	}
	return math.MaxInt64 // integers wrap identically in any order
}

// contributors is how many ranks give each element a non-zero value in
// sum, max, min and avg: values up to 3 must not sum beyond exactInts.
func contributors(t Type, nranks int) int {
	if k := exactInts(t) / 3; int64(nranks) > k {
		return int(k)
	}
	return nranks
}

// epsilon is the type's machine epsilon (0 for integers).
func epsilon(t Type) float64 {
	switch t.Name {
	case "bfloat16":
		return 0x1p-7
	case "half":
		return 0x1p-10
	case "float":
		return 0x1p-23
	case "double":
		return 0x1p-52
	}
	return 0
}

func isFloat(t Type) bool {
	return t.Name == "half" || t.Name == "float" || t.Name == "double" || t.Name == "bfloat16"
}

func put(buf []byte, t Type, i int, v float64) {
	o := i * t.Size
	switch t.Name {
	case "int8", "uint8":
		buf[o] = byte(int64(v))
	case "int32", "uint32":
		binary.LittleEndian.PutUint32(buf[o:], uint32(int64(v)))
	case "int64", "uint64":
		binary.LittleEndian.PutUint64(buf[o:], uint64(int64(v)))
	case "half":
		binary.LittleEndian.PutUint16(buf[o:], f32ToHalf(float32(v)))
	case "bfloat16":
		binary.LittleEndian.PutUint16(buf[o:], f32ToBf16(float32(v)))
	case "float":
		binary.LittleEndian.PutUint32(buf[o:], math.Float32bits(float32(v)))
	case "double":
		binary.LittleEndian.PutUint64(buf[o:], math.Float64bits(v))
	}
}

func get(buf []byte, t Type, i int) float64 {
	o := i * t.Size
	switch t.Name {
	case "int8":
		return float64(int8(buf[o]))
	case "uint8":
		return float64(buf[o])
	case "int32":
		return float64(int32(binary.LittleEndian.Uint32(buf[o:])))
	case "uint32":
		return float64(binary.LittleEndian.Uint32(buf[o:]))
	case "int64":
		return float64(int64(binary.LittleEndian.Uint64(buf[o:])))
	case "uint64":
		return float64(binary.LittleEndian.Uint64(buf[o:]))
	case "half":
		return float64(halfToF32(binary.LittleEndian.Uint16(buf[o:])))
	case "bfloat16":
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(buf[o:])) << 16))
	case "float":
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[o:])))
	default:
		return math.Float64frombits(binary.LittleEndian.Uint64(buf[o:]))
	}
}

// wrap makes integer arithmetic overflow like the device type does.
func wrap(t Type, v int64) int64 {
	switch t.Name {
	case "int8":
		return int64(int8(v))
	case "uint8":
		return int64(uint8(v))
	case "int32":
		return int64(int32(v))
	case "uint32":
		return int64(uint32(v))
	}
	return v
}

func reduce(t Type, op OpName, vals []int64) float64 {
	if isFloat(t) {
		acc := float64(vals[0])
		for _, v := range vals[1:] {
			f := float64(v)
			switch op {
			case OpSum, OpAvg:
				acc += f
			case OpProd:
				acc *= f
			case OpMax:
				acc = math.Max(acc, f)
			case OpMin:
				acc = math.Min(acc, f)
			}
		}
		if op == OpAvg {
			acc /= float64(len(vals))
		}
		return acc
	}
	acc := wrap(t, vals[0])
	for _, v := range vals[1:] {
		v = wrap(t, v)
		switch op {
		case OpSum, OpAvg:
			acc = wrap(t, acc+v)
		case OpProd:
			acc = wrap(t, acc*v)
		case OpMax:
			if v > acc {
				acc = v
			}
		case OpMin:
			if v < acc {
				acc = v
			}
		}
	}
	if op == OpAvg {
		acc = wrap(t, acc/int64(len(vals)))
	}
	return float64(acc)
}

// Case is one benchmark point whose data can be generated and checked.
type Case struct {
	Coll   Collective
	Type   Type
	Op     OpName // "" for collectives without reduction
	Root   int
	NRanks int
	C      Counts
}

func (k Case) reducing() bool { return k.Coll.HasOp }

// Input fills the send data of rank (Counts.Send elements).
func (k Case) Input(rank int) []byte {
	n := k.C.Send
	buf := make([]byte, n*k.Type.Size)
	for i := 0; i < n; i++ {
		put(buf, k.Type, i, float64(value(k.Type, rank, i, k.reducing(), k.Op, k.NRanks)))
	}
	return buf
}

// Expected returns what rank must find in its receive buffer (Counts.Recv
// elements). Reduce leaves a non-root rank's receive buffer alone: zeros
// out of place (as initialized), its own input in place.
func (k Case) Expected(rank int, inPlace bool) []byte {
	n, per := k.C.Recv, k.C.Param
	red := k.reducing()
	vals := make([]int64, k.NRanks)
	reduceAt := func(j int) float64 {
		for p := range vals {
			vals[p] = value(k.Type, p, j, red, k.Op, k.NRanks)
		}
		return reduce(k.Type, k.Op, vals)
	}
	if k.Coll.Name == "reduce" && rank != k.Root {
		if inPlace {
			return k.Input(rank)
		}
		return make([]byte, n*k.Type.Size)
	}
	buf := make([]byte, n*k.Type.Size)
	for i := 0; i < n; i++ {
		var v float64
		switch k.Coll.Name {
		case "all_reduce", "reduce":
			v = reduceAt(i)
		case "reduce_scatter":
			v = reduceAt(rank*per + i)
		case "all_gather":
			v = float64(value(k.Type, i/per, i%per, false, "", k.NRanks))
		case "broadcast":
			v = float64(value(k.Type, k.Root, i, false, "", k.NRanks))
		case "alltoall":
			v = float64(value(k.Type, i/per, rank*per+i%per, false, "", k.NRanks))
		case "sendrecv":
			v = float64(value(k.Type, (rank-1+k.NRanks)%k.NRanks, i, false, "", k.NRanks))
		}
		put(buf, k.Type, i, v)
	}
	return buf
}

// SameOnAllRanks reports whether every rank expects the same result.
func (k Case) SameOnAllRanks() bool {
	switch k.Coll.Name {
	case "all_reduce", "all_gather", "broadcast":
		return true
	}
	return false
}

// Wrong counts the elements of got that differ from want. Only a floating
// avg may differ: NCCL multiplies each value by 1/nranks in the type and
// sums the rounded terms, so the bound grows with the ranks that add
// non-zero terms (relative (k+4)·eps/2 for k of them, with the rounding of
// want itself). Everything else is exact by construction of the data.
func (k Case) Wrong(got, want []byte) int64 {
	if want == nil {
		return 0
	}
	tol := 0.0
	if k.Op == OpAvg && k.reducing() {
		tol = float64(contributors(k.Type, k.NRanks)+4) * epsilon(k.Type) / 2
	}
	var wrong int64
	n := len(want) / k.Type.Size
	if len(got) < len(want) {
		return int64(n)
	}
	for i := 0; i < n; i++ {
		g, w := get(got, k.Type, i), get(want, k.Type, i)
		if math.IsNaN(g) || math.Abs(g-w) > tol*math.Abs(w) {
			wrong++
		}
	}
	return wrong
}

func halfToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		v := float64(man) / 1024 * math.Pow(2, -14)
		if sign != 0 {
			v = -v
		}
		return float32(v)
	case exp == 31:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

func f32ToHalf(f float32) uint16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	exp := int32(x>>23&0xff) - 127 + 15
	man := x & 0x7fffff
	if x>>23&0xff == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	if exp >= 31 {
		return sign | 0x7c00
	}
	if exp <= 0 {
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint32(14 - exp)
		h, rem, half := man>>shift, man&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}

func f32ToBf16(f float32) uint16 {
	x := math.Float32bits(f)
	if x&0x7fffffff > 0x7f800000 {
		return uint16(x>>16) | 0x40
	}
	x += 0x7fff + (x>>16)&1
	return uint16(x >> 16)
}
