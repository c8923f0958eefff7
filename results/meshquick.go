package results

// QuickKind is what a quick mode's suspect is: a NIC, a node (a host of
// one rank), a host, a rail (NIC index i on every host) or a link.
type QuickKind string

// The kinds of mesh.QuickKind, as the document spells them.
const (
	QuickNIC  QuickKind = "NIC"
	QuickNode QuickKind = "node"
	QuickHost QuickKind = "host"
	QuickRail QuickKind = "rail"
	QuickLink QuickKind = "link"
)

// MeshQuick is the verdict of a mesh measured in quick mode (mesh
// --quick): a search of rounds of random perfect matchings, then adaptive
// rounds pairing each suspect with ranks known good, instead of every
// pair. Its Pairs are the directions the search measured (write-bw only);
// the mesh's Culprits, Hosts and Links stay empty: the search names its
// own suspects here.
type MeshQuick struct {
	Suspects []QuickSuspect `json:"suspects,omitempty"`
	// Rounds run, RandomRounds of them random matchings; ExpectedWallS is
	// what the planner expected them to take (the mesh's ElapsedS is what
	// they took).
	Rounds        int     `json:"rounds"`
	RandomRounds  int     `json:"random_rounds"`
	ExpectedWallS float64 `json:"expected_wall_s"`
	// UnresolvedRanks and UnresolvedPairs were still suspect when the
	// search ended: neither named nor cleared.
	UnresolvedRanks []int    `json:"unresolved_ranks,omitempty"`
	UnresolvedPairs [][2]int `json:"unresolved_pairs,omitempty"`
	// PairCoverage is the chance a given pair of one class was measured
	// in the random rounds; CannotSee says what the search is blind to.
	PairCoverage float64  `json:"pair_coverage"`
	CannotSee    []string `json:"cannot_see,omitempty"`
	// Seed drew the random matchings.
	Seed uint64 `json:"seed"`
	// Fraction is the search's threshold: a test below it × its reference
	// was slow.
	Fraction float64 `json:"fraction"`
}

// QuickSuspect is one suspect the search named.
type QuickSuspect struct {
	Kind  QuickKind `json:"kind"`
	Ranks []int     `json:"ranks,omitempty"` // NIC, node: one; host: its slow ranks; link: its two
	Host  string    `json:"host,omitempty"`
	Rail  *int      `json:"rail,omitempty"` // kind rail: the NIC index
	// Ratio is its typical figure against the reference (0.7: 30% slower).
	Ratio float64 `json:"ratio"`
	// Text is the suspect in a sentence, as the report says it.
	Text string `json:"text"`
}

// Blames says whether the search named anything or left anything open.
func (q *MeshQuick) Blames() bool {
	return len(q.Suspects)+len(q.UnresolvedRanks)+len(q.UnresolvedPairs) > 0
}

// quickNamed is every rank the quick verdict names.
func (q *MeshQuick) quickNamed() []int {
	if q == nil {
		return nil
	}
	named := append([]int(nil), q.UnresolvedRanks...)
	for _, p := range q.UnresolvedPairs {
		named = append(named, p[0], p[1])
	}
	for _, s := range q.Suspects {
		named = append(named, s.Ranks...)
	}
	return named
}
