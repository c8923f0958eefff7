// Package bench holds the parts of ncclbench that do not touch NCCL: the
// collectives' buffer-size and bandwidth rules (those of nccl-tests), the
// size sweep, deterministic test data and the expected results, and the
// table / JSON report.
package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Type is an NCCL data type as ncclbench knows it.
type Type struct {
	Name string
	Code int // ncclDataType_t
	Size int
}

// Types in nccl-tests' order; Code values are nccl.h's.
var Types = []Type{
	{"int8", 0, 1}, {"uint8", 1, 1}, {"int32", 2, 4}, {"uint32", 3, 4},
	{"int64", 4, 8}, {"uint64", 5, 8}, {"half", 6, 2}, {"float", 7, 4},
	{"double", 8, 8}, {"bfloat16", 9, 2},
}

// Op is a reduction operation.
type Op struct {
	Name OpName
	Code int // ncclRedOp_t
}

// OpName names a reduction as nccl-tests' -o and JSON do.
type OpName string

const (
	OpSum  OpName = "sum"
	OpProd OpName = "prod"
	OpMax  OpName = "max"
	OpMin  OpName = "min"
	OpAvg  OpName = "avg"
)

var Ops = []Op{{OpSum, 0}, {OpProd, 1}, {OpMax, 2}, {OpMin, 3}, {OpAvg, 4}}

// aliases accepted by -d, as nccl-tests does.
var typeAliases = map[string]string{
	"char": "int8", "int": "int32", "float16": "half", "fp16": "half",
	"float32": "float", "fp32": "float", "float64": "double", "fp64": "double", "bf16": "bfloat16",
}

// ParseTypes turns a -d value into the types to run ("all" for every one).
func ParseTypes(s string) ([]Type, error) {
	if s == "all" {
		return Types, nil
	}
	name := s
	if a, ok := typeAliases[s]; ok {
		name = a
	}
	for _, t := range Types {
		if t.Name == name {
			return []Type{t}, nil
		}
	}
	var names []string
	for _, t := range Types {
		names = append(names, t.Name)
	}
	return nil, fmt.Errorf("invalid type %q (want one of %s, all)", s, strings.Join(names, ", "))
}

// ParseOps turns a -o value into the ops to run.
func ParseOps(s string) ([]Op, error) {
	if s == "all" {
		return Ops, nil
	}
	for _, o := range Ops {
		if o.Name == OpName(s) {
			return []Op{o}, nil
		}
	}
	return nil, fmt.Errorf("invalid op %q (want sum, prod, max, min, avg or all)", s)
}

// Counts are the element counts nccl-tests derives for one size.
type Counts struct {
	Send, Recv, Param        int // elements in the send buffer, receive buffer, and the count passed to NCCL
	SendInplace, RecvInplace int // per-rank element offsets of the in-place buffers
}

// Collective describes one benchmark.
type Collective struct {
	Name    string // command name: all_reduce
	NCCL    string // NCCL call: ncclAllReduce
	HasOp   bool
	HasRoot bool
	// InPlaceUndefined: in place, the call receives into the memory it sends
	// from, and NCCL leaves the result undefined (alltoall, sendrecv);
	// nccl-tests does not check those halves.
	InPlaceUndefined bool
	// perRank: count is split across ranks (allgather, reducescatter,
	// alltoall), and bandwidth is computed on the whole size.
	perRank bool
	// busFactor turns algbw into busbw for n ranks.
	busFactor func(n int) float64
}

func one(int) float64 { return 1 }
func nMinus1OverN(n int) float64 {
	return float64(n-1) / float64(n)
}

var Collectives = []Collective{
	{Name: "all_reduce", NCCL: "ncclAllReduce", HasOp: true, busFactor: func(n int) float64 { return 2 * float64(n-1) / float64(n) }},
	{Name: "all_gather", NCCL: "ncclAllGather", perRank: true, busFactor: nMinus1OverN},
	{Name: "reduce_scatter", NCCL: "ncclReduceScatter", HasOp: true, perRank: true, busFactor: nMinus1OverN},
	{Name: "broadcast", NCCL: "ncclBroadcast", HasRoot: true, busFactor: one},
	{Name: "reduce", NCCL: "ncclReduce", HasOp: true, HasRoot: true, busFactor: one},
	{Name: "alltoall", NCCL: "ncclAlltoAll", perRank: true, InPlaceUndefined: true, busFactor: nMinus1OverN},
	{Name: "sendrecv", NCCL: "ncclSend/ncclRecv", InPlaceUndefined: true, busFactor: one},
}

// FindCollective accepts the command name, with or without "_perf" and
// underscores (all_reduce_perf, allreduce).
func FindCollective(s string) (Collective, bool) {
	k := strings.ReplaceAll(strings.TrimSuffix(s, "_perf"), "_", "")
	for _, c := range Collectives {
		if strings.ReplaceAll(c.Name, "_", "") == k {
			return c, true
		}
	}
	return Collective{}, false
}

// Counts follows nccl-tests' getCollByteCount for count = size/typeSize:
// split per rank, a rank's count is trimmed to a multiple of 16 bytes.
func (c Collective) Counts(count, nranks, typeSize int) Counts {
	if !c.perRank {
		return Counts{Send: count, Recv: count, Param: count}
	}
	per := count / nranks
	if typeSize > 0 && typeSize <= 16 {
		per &^= 16/typeSize - 1
	}
	switch c.Name {
	case "all_gather":
		return Counts{Send: per, Recv: per * nranks, Param: per, SendInplace: per}
	case "reduce_scatter":
		return Counts{Send: per * nranks, Recv: per, Param: per, RecvInplace: per}
	default: // alltoall
		return Counts{Send: per * nranks, Recv: per * nranks, Param: per}
	}
}

// Bandwidth returns algbw and busbw in GB/s (10^9 bytes) for a param count
// of elements of size typeSize moved in sec seconds, as nccl-tests does.
func (c Collective) Bandwidth(param, typeSize int, sec float64, nranks int) (algbw, busbw float64) {
	bytes := float64(param) * float64(typeSize)
	if c.perRank {
		bytes *= float64(nranks)
	}
	if sec <= 0 {
		return 0, 0
	}
	algbw = bytes / 1e9 / sec
	return algbw, algbw * c.busFactor(nranks)
}

// BusFactor is exposed for the report's explanation.
func (c Collective) BusFactor(n int) float64 { return c.busFactor(n) }

// Sizes lists the byte sizes from min to max, multiplying by factor when it
// is above 1 and adding step otherwise (nccl-tests' loop).
func Sizes(min, max, step, factor int) ([]int, error) {
	if max < min {
		return nil, fmt.Errorf("max size %d is below min size %d", max, min)
	}
	if factor <= 1 && step <= 0 {
		return nil, fmt.Errorf("step must be positive when the factor is 1")
	}
	var out []int
	for s := min; s <= max; {
		out = append(out, s)
		if factor > 1 {
			if s == 0 {
				break
			}
			s *= factor
		} else {
			s += step
		}
		if len(out) > 1<<16 {
			return nil, fmt.Errorf("too many sizes (check -i/-f)")
		}
	}
	return out, nil
}

// ParseSize reads "8", "128M", "1G", "64k", "1.5K" (powers of 1024, as
// nccl-tests).
func ParseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	if t != "" {
		switch t[len(t)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			t = strings.TrimSpace(t[:len(t)-1])
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return int(v * mult), nil
}
