// Package suggest names the command a user most likely meant when the one
// they typed does not exist ("write-bx": write-bw), so that a typo costs one
// line instead of a trip through the command list.
package suggest

import (
	"slices"
	"strings"
)

// Distance is the optimal-string-alignment distance between a and b:
// Levenshtein's insertions, deletions and substitutions, plus the swap of
// two neighbours as one edit, the commonest typo ("wirte"). It works on
// bytes: command names are ASCII.
func Distance(a, b string) int { return distance(a, b, true) }

// Levenshtein is the plain Levenshtein distance between a and b (a swap of
// neighbours is two edits), in bytes: doctor's nearest NCCL variable.
func Levenshtein(a, b string) int { return distance(a, b, false) }

// distance is Distance, or Levenshtein when swaps is false.
func distance(a, b string, swaps bool) int {
	// Three rows: a swap looks two rows back.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if swaps && i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// limit is how many edits still read as a typo of a name of n bytes: one
// for the shortest names, at most two, so that "sev" does not become
// "serve" and "lat" is not taken for "send-lat".
func limit(n int) int {
	return max(1, min(2, n/3))
}

// Nearest returns the candidates closest to typed, sorted, when they are
// within a typo of it; nil when none is. Several come back only when they
// are equally close (read-bw and send-bw from "sead-bw"). normalize, when
// not nil, maps typed and every candidate before they are compared: a
// tool's own spelling rules (perftest's ib_write_bw for write-bw).
func Nearest(typed string, candidates []string, normalize func(string) string) []string {
	if normalize == nil {
		normalize = func(s string) string { return s }
	}
	t := normalize(typed)
	var best []string
	bestD := limit(len(t))
	for _, c := range candidates {
		if c == typed {
			continue
		}
		d := Distance(t, normalize(c))
		switch {
		case d > bestD:
		case len(best) == 0 || d < bestD:
			best, bestD = []string{c}, d
		case d == bestD:
			best = append(best, c)
		}
	}
	slices.Sort(best)
	return slices.Compact(best)
}

// Phrase is "; did you mean A?" (or "A or B", "A, B or C") for the
// candidates Nearest returned, "" for none: the tail of a tool's one-line
// "unknown command" error.
func Phrase(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return "; did you mean " + names[0] + "?"
	}
	return "; did you mean " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1] + "?"
}
