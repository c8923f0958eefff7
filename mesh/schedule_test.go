package mesh

import (
	"fmt"
	"strings"
	"testing"
)

// checkRounds asserts the rounds hold each wanted pair exactly once and
// no rank twice in a round.
func checkRounds(t *testing.T, n int, rounds [][]Pair, want map[Pair]bool) {
	t.Helper()
	seen := map[Pair]int{}
	for i, round := range rounds {
		busy := map[int]bool{}
		for _, p := range round {
			if p.A >= p.B || p.A < 0 || p.B >= n {
				t.Fatalf("round %d: bad pair %v", i, p)
			}
			if busy[p.A] || busy[p.B] {
				t.Fatalf("round %d: %v meets a rank already busy in %v", i, p, round)
			}
			busy[p.A], busy[p.B] = true, true
			seen[p]++
		}
	}
	for p, c := range seen {
		if c != 1 || !want[p] {
			t.Errorf("pair %v scheduled %d times (wanted: %v)", p, c, want[p])
		}
	}
	for p := range want {
		if seen[p] == 0 {
			t.Errorf("pair %v never scheduled", p)
		}
	}
}

func allPairs(n int) map[Pair]bool {
	m := map[Pair]bool{}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			m[Pair{a, b}] = true
		}
	}
	return m
}

func TestTournament(t *testing.T) {
	for _, tc := range []struct {
		n, rounds, perRound int
	}{
		{0, 0, 0}, {1, 0, 0}, {2, 1, 1}, {3, 3, 1}, {4, 3, 2}, {5, 5, 2}, {6, 5, 3}, {7, 7, 3}, {16, 15, 8}, {33, 33, 16}, {100, 99, 50},
	} {
		rounds := Tournament(tc.n)
		if len(rounds) != tc.rounds {
			t.Errorf("n=%d: %d rounds, want %d", tc.n, len(rounds), tc.rounds)
		}
		rests := map[int]int{}
		for i, r := range rounds {
			if len(r) != tc.perRound {
				t.Errorf("n=%d round %d: %d pairs, want %d", tc.n, i, len(r), tc.perRound)
			}
			busy := map[int]bool{}
			for _, p := range r {
				busy[p.A], busy[p.B] = true, true
			}
			for k := 0; k < tc.n; k++ {
				if !busy[k] {
					rests[k]++
				}
			}
		}
		checkRounds(t, tc.n, rounds, allPairs(tc.n))
		// Odd n: each rank rests exactly once; even n: never.
		for k := 0; k < tc.n; k++ {
			if want := tc.n % 2; tc.n > 1 && rests[k] != want {
				t.Errorf("n=%d: rank %d rests %d times, want %d", tc.n, k, rests[k], want)
			}
		}
	}
}

func TestSubset(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n         int
		pairs     []Pair
		maxRounds int
	}{
		{"one pair", 8, []Pair{{2, 5}}, 1},
		{"a star", 6, []Pair{{0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}}, 5},
		{"disjoint", 8, []Pair{{0, 1}, {2, 3}, {4, 5}, {6, 7}}, 4},
		{"all of them", 5, nil, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := map[Pair]bool{}
			for _, p := range tc.pairs {
				want[p] = true
			}
			if tc.pairs == nil {
				want = allPairs(tc.n)
				for p := range want {
					tc.pairs = append(tc.pairs, p)
				}
			}
			rounds := Subset(tc.n, tc.pairs)
			checkRounds(t, tc.n, rounds, want)
			if len(rounds) > tc.maxRounds {
				t.Errorf("%d rounds, want at most %d", len(rounds), tc.maxRounds)
			}
		})
	}
}

func TestParsePairs(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Pair
		err      string
	}{
		{"forms", "# rack 1\n0 1\n3,2\n\n4,5  # a comment\n1\t0\n", []Pair{{0, 1}, {2, 3}, {4, 5}}, ""},
		{"one rank", "0\n", nil, "line 1"},
		{"three ranks", "0 1 2\n", nil, "want two ranks"},
		{"out of range", "0 1\n0 6\n", nil, `line 2: "6" is not a rank`},
		{"negative", "-1 2\n", nil, `"-1" is not a rank`},
		{"not a number", "a b\n", nil, `"a" is not a rank`},
		{"itself", "3 3\n", nil, "rank 3 paired with itself"},
		{"empty", "# nothing\n", nil, "no pairs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePairs(strings.NewReader(tc.in), 6)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
	big := strings.NewReader(strings.Repeat("0 1\n", maxPairsFile/4+10))
	if _, err := ParsePairs(big, 2); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("a file beyond the bound: %v", err)
	}
}

// Ranks that share a NIC never run two pairs at once, a host runs at most
// --per-host of its pairs at once, every pair is still scheduled once,
// and ranks with hosts and NICs of their own keep the tournament.
func TestLimitShared(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		share   func(r int) Share
		perHost int
		rounds  int // the rounds it takes
	}{
		{"a host each", 6, func(r int) Share { return Share{NIC: fmt.Sprint("n", r), Host: fmt.Sprint("h", r)} }, 0, 5},
		{"make demo: 4 ranks on one NIC", 4, func(int) Share { return Share{NIC: "h/rxe0:1", Host: "h"} }, 0, 6},
		{"4 NICs on one host, no bound", 4, func(r int) Share { return Share{NIC: fmt.Sprint("h/mlx5_", r), Host: "h"} }, 0, 3},
		{"4 NICs on one host, --per-host 1", 4, func(r int) Share { return Share{NIC: fmt.Sprint("h/mlx5_", r), Host: "h"} }, 1, 6},
		{"2 hosts of 4, --per-host 2", 8, func(r int) Share { return Share{NIC: fmt.Sprint(r/4, "/mlx5_", r%4), Host: fmt.Sprint(r / 4)} }, 2, 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			share := make([]Share, tc.n)
			for r := range share {
				share[r] = tc.share(r)
			}
			rounds := LimitShared(Tournament(tc.n), share, tc.perHost)
			checkRounds(t, tc.n, rounds, allPairs(tc.n))
			if len(rounds) != tc.rounds {
				t.Errorf("%d rounds, want %d: %v", len(rounds), tc.rounds, rounds)
			}
			for i, round := range rounds {
				nics, hosts := map[string]int{}, map[string]int{}
				for _, p := range round {
					for nic := range map[string]bool{share[p.A].NIC: true, share[p.B].NIC: true} {
						nics[nic]++
					}
					for h := range map[string]bool{share[p.A].Host: true, share[p.B].Host: true} {
						hosts[h]++
					}
				}
				for nic, k := range nics {
					if k > 1 {
						t.Errorf("round %d: NIC %s in %d pairs at once", i, nic, k)
					}
				}
				for h, k := range hosts {
					if tc.perHost > 0 && k > tc.perHost {
						t.Errorf("round %d: host %s in %d pairs at once, --per-host %d", i, h, k, tc.perHost)
					}
				}
			}
		})
	}
}
