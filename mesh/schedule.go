// Package mesh runs an all-pairs measurement over the ranks of a launcher
// (srun, mpirun, torchrun): rank 0 schedules a round-robin tournament,
// each pair measures both directions, and the outliers are retested alone
// and traced to a node or a link. It knows the ranks through a Runner, so
// that the schedule, the verdicts and the failure handling are tested
// without hardware; cmd/rdmabench runs the engine behind it.
package mesh

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Pair is two ranks, A < B.
type Pair struct{ A, B int }

func (p Pair) String() string { return fmt.Sprintf("%d-%d", p.A, p.B) }

func pairOf(a, b int) Pair {
	if a > b {
		a, b = b, a
	}
	return Pair{a, b}
}

// Tournament is the round-robin schedule of n ranks (the circle method):
// n−1 rounds of n/2 disjoint pairs for even n, n rounds of (n−1)/2 for odd
// n, where each round one rank rests. Every pair meets exactly once.
func Tournament(n int) [][]Pair {
	if n < 2 {
		return nil
	}
	m := n
	if m%2 == 1 {
		m++ // a phantom rank: whoever meets it rests
	}
	rounds := make([][]Pair, m-1)
	for r := range rounds {
		// Rank m−1 stays put; the others turn around the circle.
		pairs := make([]Pair, 0, m/2)
		if r < n && m-1 < n {
			pairs = append(pairs, pairOf(r, m-1))
		}
		for k := 1; k < m/2; k++ {
			a, b := (r+k)%(m-1), (r-k+m-1)%(m-1)
			if a < n && b < n {
				pairs = append(pairs, pairOf(a, b))
			}
		}
		rounds[r] = pairs
	}
	return rounds
}

// Subset schedules only the given pairs: each goes into the first round,
// in tournament order, where neither of its ranks is busy, so that the
// rounds stay disjoint and are never more than the full tournament's.
func Subset(n int, want []Pair) [][]Pair {
	wanted := map[Pair]bool{}
	for _, p := range want {
		wanted[p] = true
	}
	var rounds [][]Pair
	var busy []map[int]bool
	for _, round := range Tournament(n) {
		for _, p := range round {
			if !wanted[p] {
				continue
			}
			i := 0
			for ; i < len(rounds); i++ {
				if !busy[i][p.A] && !busy[i][p.B] {
					break
				}
			}
			if i == len(rounds) {
				rounds = append(rounds, nil)
				busy = append(busy, map[int]bool{})
			}
			rounds[i] = append(rounds[i], p)
			busy[i][p.A], busy[i][p.B] = true, true
		}
	}
	return rounds
}

// maxPairsFile bounds what ParsePairs reads (a million lines).
const maxPairsFile = 16 << 20

// ParsePairs reads --pairs: one pair of ranks a line ("3 7" or "3,7"), #
// comments and blank lines ignored. A pair given twice (either
// way round) counts once; a rank outside 0..n−1 or a rank paired with
// itself is an error naming the line.
func ParsePairs(r io.Reader, n int) ([]Pair, error) {
	lr := &io.LimitedReader{R: r, N: maxPairsFile + 1}
	sc := bufio.NewScanner(lr)
	seen := map[Pair]bool{}
	var out []Pair
	for line := 1; sc.Scan(); line++ {
		if lr.N == 0 { // read past the bound: the last line may be cut
			return nil, fmt.Errorf("longer than %d MiB", maxPairsFile>>20)
		}
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.FieldsFunc(text, func(c rune) bool { return c == ' ' || c == '\t' || c == ',' })
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: %q: want two ranks, e.g. 3 7", line, strings.TrimSpace(text))
		}
		var ab [2]int
		for i, s := range f {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 || v >= n {
				return nil, fmt.Errorf("line %d: %q is not a rank of this mesh (0 to %d)", line, s, n-1)
			}
			ab[i] = v
		}
		if ab[0] == ab[1] {
			return nil, fmt.Errorf("line %d: rank %d paired with itself", line, ab[0])
		}
		p := pairOf(ab[0], ab[1])
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no pairs in it")
	}
	return out, nil
}

// Share says what a rank shares with others: its NIC (host, device and
// port; several processes on one device share it) and its host.
type Share struct{ NIC, Host string }

// LimitShared splits each round so that no NIC is in two pairs at once (a
// device in two pairs measures how it divides itself, not either pair),
// and, when perHost > 0, no host is in more than perHost pairs at once (so
// that ranks of one host do not measure their CPU, memory or PCIe sharing
// instead of their pairs). A pair whose two ranks share a NIC or a host
// counts once for it. The pairs keep their order; rounds only grow.
func LimitShared(rounds [][]Pair, share []Share, perHost int) [][]Pair {
	var out [][]Pair
	for _, round := range rounds {
		var sub [][]Pair
		var nics []map[string]bool
		var hosts []map[string]int
		for _, p := range round {
			pn := map[string]bool{share[p.A].NIC: true, share[p.B].NIC: true}
			ph := map[string]bool{share[p.A].Host: true, share[p.B].Host: true}
			i := 0
			for ; i < len(sub); i++ {
				fits := true
				for nic := range pn {
					fits = fits && !nics[i][nic]
				}
				for h := range ph {
					fits = fits && (perHost <= 0 || hosts[i][h] < perHost)
				}
				if fits {
					break
				}
			}
			if i == len(sub) {
				sub = append(sub, nil)
				nics, hosts = append(nics, map[string]bool{}), append(hosts, map[string]int{})
			}
			sub[i] = append(sub[i], p)
			for nic := range pn {
				nics[i][nic] = true
			}
			for h := range ph {
				hosts[i][h]++
			}
		}
		out = append(out, sub...)
	}
	return out
}

// ReadPairsFile reads --pairs FILE for a mesh of n ranks (ParsePairs).
func ReadPairsFile(path string, n int) ([]Pair, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParsePairs(f, n)
}
