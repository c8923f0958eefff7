package launch

import (
	"fmt"
	"strconv"
	"strings"
)

// maxHosts bounds an expansion: a node list names a job's nodes, and a
// typo such as node[1-99999999] must fail in one line, not fill memory.
const maxHosts = 1 << 20

// ExpandHostlist expands a Slurm node list ("node[01-03,07],gpu-a[1-2]")
// into its host names, in order, as `scontrol show hostnames` does: a
// bracket holds comma-separated numbers and lo-hi ranges; a range whose
// low end has leading zeros keeps that width (01-10: 01 ... 10); several
// brackets in one name multiply (rack[1-2]-n[1-2]: rack1-n1 rack1-n2 ...).
func ExpandHostlist(list string) ([]string, error) {
	return expandHostlist(list, maxHosts)
}

// FirstHost is the first host of a Slurm node list, without expanding the
// rest.
func FirstHost(list string) (string, error) {
	hs, err := expandHostlist(list, 1)
	if err != nil {
		return "", err
	}
	if len(hs) == 0 {
		return "", fmt.Errorf("node list %q names no host", list)
	}
	return hs[0], nil
}

// expandHostlist stops after limit names; more than maxHosts is an error.
func expandHostlist(list string, limit int) ([]string, error) {
	var out []string
	for _, item := range splitTop(list) {
		if item == "" {
			return nil, fmt.Errorf("node list %q: empty name", list)
		}
		names, err := expandItem(item, limit-len(out))
		if err != nil {
			return nil, fmt.Errorf("node list %q: %w", list, err)
		}
		out = append(out, names...)
		if len(out) >= limit {
			break
		}
	}
	return out, nil
}

// splitTop splits at the commas outside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// expandItem expands one name with zero or more bracket groups.
func expandItem(item string, limit int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.IndexByte(item, ']') >= 0 {
			return nil, fmt.Errorf("%q: ']' without '['", item)
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%q: '[' without ']'", item)
	}
	end += open
	prefix, body, rest := item[:open], item[open+1:end], item[end+1:]
	if strings.IndexByte(prefix, ']') >= 0 || strings.IndexByte(body, '[') >= 0 {
		return nil, fmt.Errorf("%q: unbalanced brackets", item)
	}
	nums, err := expandRanges(body, limit)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", item, err)
	}
	// The rest may hold further brackets: each number here is followed by
	// every name of the rest.
	tails, err := expandItem(rest, limit)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range nums {
		for _, t := range tails {
			if len(out) >= limit {
				return out, nil
			}
			out = append(out, prefix+n+t)
		}
	}
	return out, nil
}

// expandRanges expands "01-03,07" to 01 02 03 07.
func expandRanges(body string, limit int) ([]string, error) {
	if body == "" {
		return nil, fmt.Errorf("empty brackets")
	}
	var out []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err := parseIndex(lo)
		if err != nil {
			return nil, err
		}
		b, err := parseIndex(hi)
		if err != nil {
			return nil, err
		}
		if b < a {
			return nil, fmt.Errorf("range %q runs backwards", r)
		}
		if b-a >= maxHosts {
			return nil, fmt.Errorf("range %q names more than %d hosts", r, maxHosts)
		}
		// Leading zeros on the low end fix the width (Slurm's rule).
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		for i := a; i <= b && len(out) < limit; i++ {
			out = append(out, fmt.Sprintf("%0*d", width, i))
		}
	}
	return out, nil
}

func parseIndex(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 1<<40 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n, nil
}
