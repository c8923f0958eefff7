package render

import (
	"fmt"
	"strings"

	"github.com/rdmabench/rdmabench/results"
)

// Severity orders verdicts: what failed first, then what to look at, then
// what passed.
type Severity int

const (
	SeverityFail Severity = iota
	SeverityWarn
	SeverityPass
)

var severityNames = [...]string{"FAIL", "WARN", "OK"}

func (s Severity) String() string {
	if s < 0 || int(s) >= len(severityNames) {
		return fmt.Sprintf("Severity(%d)", int(s))
	}
	return severityNames[s]
}

// Verdict is one conclusion of a saved document: a culprit, a regression,
// a straggler, a FAIL, or that all is well.
type Verdict struct {
	Severity Severity
	Text     string
}

// meshFindings are the mesh's conclusions, in MeshText's order: the hosts
// and NICs blamed, the links, the inconclusive outliers, ranks that left,
// failed pairs, the mesh's error, or that it found nothing.
func meshFindings(m *results.Mesh) []Verdict {
	if m.Quick != nil {
		return meshQuickFindings(m)
	}
	var f findings
	f.blame(m)
	f.doubts(m)
	f.failures(m)
	f.clean(m)
	return f
}

// findings are the verdicts of a mesh, in the order the report says them.
type findings []Verdict

func (f *findings) add(s Severity, format string, a ...any) {
	*f = append(*f, Verdict{s, fmt.Sprintf(format, a...)})
}

// blame is what the mesh names: hosts, culprit ranks, links.
func (f *findings) blame(m *results.Mesh) {
	host := func(r int) string { return m.Ranks[r].Host }
	for _, h := range m.Hosts {
		where := ""
		switch {
		case h.PCIRoot != "":
			where = ", all under PCI root " + h.PCIRoot
		case h.NUMANode != nil:
			where = fmt.Sprintf(", all on NUMA node %d", *h.NUMANode)
		}
		f.add(SeverityFail, "LIKELY CULPRIT: host %s, not one NIC: %d of its %d NICs slow (ranks %s%s): its CPUs, memory, PCIe or software",
			h.Host, h.NICs, h.Total, strings.ReplaceAll(joinInts(h.Ranks), ",", ", "), where)
	}
	for _, cu := range m.Culprits {
		var b strings.Builder
		switch cu.Kind {
		case results.CulpritHost:
			fmt.Fprintf(&b, "  rank %d (%s %s)", cu.Rank, host(cu.Rank), m.Ranks[cu.Rank].Device)
		case results.CulpritNIC:
			fmt.Fprintf(&b, "LIKELY CULPRIT: rank %d (%s %s), the NIC (its host's other NICs are fine)", cu.Rank, host(cu.Rank), m.Ranks[cu.Rank].Device)
		default:
			fmt.Fprintf(&b, "LIKELY CULPRIT: rank %d (%s), the node", cu.Rank, host(cu.Rank))
		}
		fmt.Fprintf(&b, ": %d of its %d pairs bad", cu.BadPairs, cu.Pairs)
		if cu.FailedPairs > 0 {
			fmt.Fprintf(&b, " (%d failed)", cu.FailedPairs)
		}
		b.WriteString(culpritRatios(cu))
		f.add(SeverityFail, "%s", b.String())
	}
	for _, l := range m.Links {
		what := "slower than both ranks' other pairs"
		if l.Failed {
			what = "failed while both ranks work with the others"
		}
		if l.OneWay {
			f.add(SeverityFail, "LIKELY ONE DIRECTION: rank %d (%s) -> rank %d (%s): %s, the other way fine (one side of the path)", l.A, host(l.A), l.B, host(l.B), what)
			continue
		}
		name := "LIKELY LINK"
		if l.Failed {
			name = "DEAD PATH"
		}
		f.add(SeverityFail, "%s: rank %d (%s) - rank %d (%s): %s", name, l.A, host(l.A), l.B, host(l.B), what)
	}
}

// doubts are the outliers nothing explains and the directions not judged.
func (f *findings) doubts(m *results.Mesh) {
	for _, d := range m.Inconclusive {
		f.add(SeverityWarn, "inconclusive %d->%d: an outlier that no retest confirmed and no culprit or link explains: not blamed (rerun, or more --max-retests)", d.From, d.To)
	}
	if len(m.NotJudged) > 0 {
		by := map[results.PairClass]int{}
		for _, d := range m.NotJudged {
			for _, p := range m.Pairs {
				if p.From == d.From && p.To == d.To {
					by[p.Class]++
					break
				}
			}
		}
		var parts []string
		for c := results.PairClass(0); c < results.NumPairClasses; c++ {
			if by[c] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", by[c], c.Describe()))
			}
		}
		f.add(SeverityWarn, "not judged: %s (%s): neither rank has another pair of its class to compare with, so never blamed", Plural(len(m.NotJudged), "direction"), strings.Join(parts, ", "))
	}
}

// failures are the ranks that left, the directions that failed and the
// mesh's own error.
func (f *findings) failures(m *results.Mesh) {
	for _, r := range m.Ranks {
		if r.Dead == "" {
			continue
		}
		when := fmt.Sprintf("in round %d", r.DeadRound)
		switch {
		case r.DeadRound == 0:
			when = "before the first round"
		case r.DeadRound > m.Rounds:
			when = "during the retests"
		}
		f.add(SeverityFail, "rank %d (%s) left the mesh %s: %s", r.Rank, dash(r.Host), when, r.Dead)
	}
	for _, p := range m.Pairs {
		switch {
		case p.Error == "" || strings.Contains(p.Error, "left the mesh:"):
		case p.Failed():
			f.add(SeverityFail, "failed %d->%d (round %d): %s", p.From, p.To, p.Round, p.Error)
		default:
			// Measured again, it worked: let go, as an outlier
			// its retest cleared.
			f.add(SeverityWarn, "failed %d->%d (round %d): %s; %s %.2f Gb/s, %.2f us: fine (failed only while other pairs ran)",
				p.From, p.To, p.Round, p.Error, RetestHow(p.Retest), p.Retest.BWGbps, p.Retest.LatP50us)
		}
	}
	if m.Error != "" {
		f.add(SeverityFail, "mesh: %s", m.Error)
	}
}

// clean is the one line of a mesh that blames nothing.
func (f *findings) clean(m *results.Mesh) {
	if MeshClean(m) {
		cleared := 0
		for _, p := range m.Pairs {
			if p.Outlier() || p.Error != "" {
				cleared++ // clean: every failure's retest measured it
			}
		}
		if cleared == 0 {
			f.add(SeverityPass, "no outliers, no failures, no mismatches")
		} else {
			f.add(SeverityPass, "no outliers left (%d cleared by a retest), no failures, no mismatches", cleared)
		}
	}
}

// mismatchText is one inventory fact on which ranks differ.
func mismatchText(mm results.Mismatch) string {
	var o []string
	for _, v := range mm.Odd {
		o = append(o, fmt.Sprintf("rank %d has %s", v.Rank, v.Value))
	}
	return fmt.Sprintf("! %s differs: most have %s; %s", mm.Fact, mm.Majority, strings.Join(o, ", "))
}
