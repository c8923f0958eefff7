package render

// A mesh measured in quick mode (mesh --quick): its report is the
// search's verdict, not the matrices of every pair.

import (
	"fmt"
	"io"
	"strings"

	"github.com/rdmabench/rdmabench/results"
)

// meshQuickText is MeshText of a quick mode's mesh: what ran, the ranks,
// the suspects named (kind NIC, node, host, rail or link), what is left
// open, the ranks that left and what the search cannot see.
func meshQuickText(w io.Writer, m *results.Mesh) error {
	var b strings.Builder
	q := m.Quick
	failed := 0
	for _, p := range m.Pairs {
		if p.Error != "" {
			failed++
		}
	}
	fmt.Fprintf(&b, "rdmabench mesh --quick: %d ranks (%s), %s (%d random matchings, then adaptive), both directions of each pair at once, write-bw %s for %gs; %d directions measured, %d failed; %.0fs in all (expected %.0fs); seed %d\n",
		len(m.Ranks), m.Launcher, Plural(q.Rounds, "round"), q.RandomRounds, SizeName(m.BWSize), quickBWDuration(m), len(m.Pairs)-failed, failed, m.ElapsedS, q.ExpectedWallS, q.Seed)
	meshRanks(&b, m)
	b.WriteString("\n")
	for _, f := range meshQuickFindings(m) {
		fmt.Fprintf(&b, " %s\n", f.Text)
	}
	for _, c := range q.CannotSee {
		fmt.Fprintf(&b, " cannot see: %s\n", c)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// quickBWDuration is what each direction's write-bw ran for: the
// screening's duration where --screen was given.
func quickBWDuration(m *results.Mesh) float64 {
	if m.Screen != nil {
		return m.Screen.BWDurationS
	}
	return m.BWDurationS
}

// meshQuickFindings are a quick mesh's conclusions, in its report's order.
func meshQuickFindings(m *results.Mesh) []Verdict {
	var f findings
	q := m.Quick
	for _, s := range q.Suspects {
		f.add(SeverityFail, "LIKELY %s: %s", strings.ToUpper(string(s.Kind)), s.Text)
	}
	if len(q.UnresolvedRanks) > 0 {
		f.add(SeverityWarn, "unresolved: ranks %s still suspect when the search ended: neither named nor cleared (a full mesh of them, --pairs, tells)", joinInts(q.UnresolvedRanks))
	}
	for _, p := range q.UnresolvedPairs {
		f.add(SeverityWarn, "unresolved: pair %d-%d slow once, not retested to the end: neither named nor cleared", p[0], p[1])
	}
	for _, r := range m.Ranks {
		if r.Dead != "" {
			f.add(SeverityFail, "rank %d (%s) left the mesh in round %d: %s", r.Rank, dash(r.Host), r.DeadRound, r.Dead)
		}
	}
	if m.Error != "" {
		f.add(SeverityFail, "mesh: %s", m.Error)
	}
	if meshQuickClean(m) {
		f.add(SeverityPass, "nothing named, nothing left open: no NIC, node, host, rail or link slower than %.2f x the others", q.Fraction)
	}
	return f
}

// meshQuickClean: nothing named, nothing open, no rank lost, no error.
func meshQuickClean(m *results.Mesh) bool {
	if m.Quick.Blames() || m.Error != "" {
		return false
	}
	for _, r := range m.Ranks {
		if r.Dead != "" {
			return false
		}
	}
	return true
}
