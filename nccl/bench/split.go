package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// Split is nccl-tests' NCCL_TESTS_SPLIT and NCCL_TESTS_SPLIT_MASK: each
// process's color, from its process rank, and the processes of a color
// form a communicator of their own (ordered by process rank), all groups
// running the same benchmark at once.
type Split struct {
	Op    SplitOp
	Value int
	Spec  string // as given, "NCCL_TESTS_SPLIT=MOD 2", for messages
}

// SplitOp is how a process rank becomes its color.
type SplitOp int

const (
	SplitAnd SplitOp = iota
	SplitOr
	SplitMod
	SplitDiv
)

// ParseSplit reads NCCL_TESTS_SPLIT_MASK (hex, taking precedence, as in
// nccl-tests) or NCCL_TESTS_SPLIT ("AND 0x7", "&7", "OR 1", "|1", "MOD 8",
// "%8", "DIV 8", "/8"; case-insensitive). Both empty: nil, no split.
// nccl-tests leaves a value it cannot read, or MOD/DIV by zero, to crash
// or to fall back to one group silently; here they are errors.
func ParseSplit(mask, expr string) (*Split, error) {
	if mask != "" {
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(mask), "0x"), "0X"), 16, 31)
		if err != nil {
			return nil, fmt.Errorf("NCCL_TESTS_SPLIT_MASK=%s: want a hexadecimal mask (0x7)", mask)
		}
		return &Split{Op: SplitAnd, Value: int(v), Spec: "NCCL_TESTS_SPLIT_MASK=" + mask}, nil
	}
	if expr == "" {
		return nil, nil
	}
	spec := "NCCL_TESTS_SPLIT=" + expr
	s := strings.TrimSpace(expr)
	for _, w := range []struct {
		names []string
		op    SplitOp
	}{{[]string{"AND", "&"}, SplitAnd}, {[]string{"OR", "|"}, SplitOr}, {[]string{"MOD", "%"}, SplitMod}, {[]string{"DIV", "/"}, SplitDiv}} {
		for _, name := range w.names {
			if len(s) < len(name) || !strings.EqualFold(s[:len(name)], name) {
				continue
			}
			v, err := strconv.ParseInt(strings.TrimSpace(s[len(name):]), 0, 32)
			switch {
			case err != nil || v < 0:
				return nil, fmt.Errorf("%s: want %s and a non-negative number (%s 8)", spec, name, name)
			case v == 0 && (w.op == SplitMod || w.op == SplitDiv):
				return nil, fmt.Errorf("%s: %s by zero", spec, name)
			}
			return &Split{Op: w.op, Value: int(v), Spec: spec}, nil
		}
	}
	return nil, fmt.Errorf("%s: want AND, OR, MOD or DIV (&, |, %%, /) and a number, as nccl-tests reads it (MOD 8)", spec)
}

// Color is process rank proc's color.
func (s *Split) Color(proc int) int {
	switch s.Op {
	case SplitOr:
		return proc | s.Value
	case SplitMod:
		return proc % s.Value
	case SplitDiv:
		return proc / s.Value
	}
	return proc & s.Value
}

// Groups are the process ranks of each color, ordered by their first
// process rank; each group's processes in rank order.
func (s *Split) Groups(procs int) [][]int {
	index := map[int]int{}
	var out [][]int
	for p := 0; p < procs; p++ {
		c := s.Color(p)
		i, ok := index[c]
		if !ok {
			i = len(out)
			index[c] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], p)
	}
	return out
}
