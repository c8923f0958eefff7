package rank

import (
	"fmt"
	"time"

	"github.com/rdmabench/rdmabench/mesh"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

// SharedNote says how ranks that share a NIC or a host were scheduled:
// "" when every rank has a host of its own.
func SharedNote(m *results.Mesh, s mesh.Schedule, perHost int) string {
	nics, hosts := map[string]int{}, map[string]int{}
	for _, rk := range m.Ranks {
		if rk.Device != "" {
			nics[rk.NIC()]++
			hosts[rk.Host]++
		}
	}
	sharedNIC, sharedHost := 0, 0
	for _, k := range nics {
		if k > 1 {
			sharedNIC++
		}
	}
	for _, k := range hosts {
		if k > 1 {
			sharedHost++
		}
	}
	switch {
	case sharedNIC == 0 && sharedHost == 0:
		return ""
	case perHost > 0:
		return fmt.Sprintf("%s with several ranks (%s shared by several); at most %d of a host's pairs at once (--per-host), none of a NIC's", render.Plural(sharedHost, "host"), render.Plural(sharedNIC, "NIC"), perHost)
	case sharedNIC > 0:
		return fmt.Sprintf("%s shared by several ranks: its pairs run one at a time (%s); the pairs of a host's different NICs run at once (--per-host to bound them)", render.Plural(sharedNIC, "NIC"), render.Plural(len(s.Rounds), "round"))
	}
	return fmt.Sprintf("%s with several NICs: their pairs run at once and share the host's CPUs, memory and PCIe (--per-host to bound them)", render.Plural(sharedHost, "host"))
}

// setupNote says once what a mesh sets up, and how often.
const setupNote = "set-up: each rank opens its device, PD and buffers once, kept for all its tasks; a direction dials once and makes one set of QPs on each end, which both its tests use (--setup-estimate)"

// Describe is the schedule s as rank 0 and --plan say it: its rounds,
// what each direction measures, the expected time, the retests' budget
// and the set-up.
func (sz *Sizing) Describe(sch mesh.Schedule) string {
	return sz.describeRounds(sch) + "; " + setupNote
}

func (sz *Sizing) describeRounds(sch mesh.Schedule) string {
	if sz.Screen > 0 {
		return fmt.Sprintf("%s of up to %s at once, screening both directions of each at once: write-bw %s for %v and send-lat %s %d times, + %v set-up = %v a round; expected about %v, then %d healthy directions (controls) and each outlier retested alone at full length (write-bw for %v, send-lat %d times): about %v each, %v for the controls, then the outliers' retests%s within %v (at most %v in all)",
			render.Plural(len(sch.Rounds), "round"), render.Plural(sch.Widest, "pair"), render.SizeName(sz.BWSize), sz.Screen, render.SizeName(sz.LatSize), sz.ScreenLatIters(),
			sz.SetupEst, sz.ScreenEstimate(), sch.Est.Round(time.Second), sz.Controls(), sz.BWDuration, sz.LatIters, sz.Estimate().Round(100*time.Millisecond),
			(time.Duration(sz.Controls()) * sz.Estimate()).Round(time.Second), sz.atOnceNote(), sch.Budget.Round(time.Second), sch.Bound.Round(time.Second))
	}
	return fmt.Sprintf("%s of up to %s at once, both directions of each: write-bw %s for %v, send-lat %s %d times, + %v set-up = %v a direction; expected about %v, then the outliers' retests (each its slow figure alone, a bandwidth about %v)%s within %v (at most %v in all)",
		render.Plural(len(sch.Rounds), "round"), render.Plural(sch.Widest, "pair"), render.SizeName(sz.BWSize), sz.BWDuration, render.SizeName(sz.LatSize), sz.LatIters,
		sz.SetupEst, sz.Estimate().Round(100*time.Millisecond), sch.Est.Round(time.Second), sz.Estimate().Round(time.Second), sz.atOnceNote(), sch.Budget.Round(time.Second), sch.Bound.Round(time.Second))
}

// atOnceNote says how the outliers' write-bw is retested first
// (--retest-at-once), or nothing where every retest runs alone.
func (sz *Sizing) atOnceNote() string {
	if sz.AtOnce <= 1 {
		return ""
	}
	return fmt.Sprintf(" (their write-bw first %d at a time, no rank or NIC in two; alone where slow there)", sz.AtOnce)
}
