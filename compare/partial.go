package compare

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rdmabench/rdmabench/results"
)

// ErrPartial marks a comparison refused because a run is partial: it ended
// with an error (or Ctrl-C), or measured some size with fewer repeats than
// it asked for. Its figures may still compare, but a gate that passes on
// them passes a damaged run; Options.AllowPartial compares it anyway.
var ErrPartial = errors.New("partial run")

// Partial is how a run falls short of what it asked for.
type Partial struct {
	Error       string `json:"error,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
	// RepeatsAsked is what --repeat asked (1 without it); Short are the
	// results, in the run's order, with fewer repeats, then the sizes asked
	// for that no repeat measured (Repeats 0).
	RepeatsAsked int     `json:"repeats_asked"`
	Short        []Short `json:"short,omitempty"`
	// sweep: the run measured several QP counts, and a size alone does not
	// say which result is short.
	sweep bool
}

// Short is a size (and QP count) measured by fewer repeats than asked.
type Short struct {
	Size    int `json:"size"`
	QPs     int `json:"qps"`
	Repeats int `json:"repeats"`
}

// partialOf says how a run falls short, nil when it does not.
func partialOf(r *results.Run) *Partial {
	p := &Partial{Error: oneLine(r.Error), Interrupted: r.Interrupted, RepeatsAsked: r.RepeatsAsked()}
	type key struct{ size, qps int }
	seen := map[key]bool{}
	qps := map[int]bool{}
	for _, q := range r.QPs {
		qps[q] = true
	}
	for _, res := range r.Results {
		seen[key{res.Size, res.QPs}] = true
		qps[res.QPs] = true
		if n := res.RepeatsDone(); n < p.RepeatsAsked {
			p.Short = append(p.Short, Short{Size: res.Size, QPs: res.QPs, Repeats: n})
		}
	}
	// The sizes the plan asked for that no repeat reached (a first repeat
	// cut short) are in Sizes and QPs, not in Results.
	for _, s := range r.Sizes {
		for _, q := range r.QPs {
			if !seen[key{s, q}] {
				seen[key{s, q}] = true
				p.Short = append(p.Short, Short{Size: s, QPs: q})
			}
		}
	}
	if p.Error == "" && !p.Interrupted && len(p.Short) == 0 {
		return nil
	}
	p.sweep = len(qps) > 1
	return p
}

// oneLine joins a multi-line error (several verification failures, joined)
// into the one line a refusal is.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// String says how the run falls short: "it ended with an error (…); sizes
// 64K, 1M have 4 of 5 repeats".
func (p *Partial) String() string {
	var parts []string
	switch {
	case p.Interrupted:
		parts = append(parts, "it was interrupted (Ctrl-C)")
	case p.Error != "":
		parts = append(parts, "it ended with an error ("+p.Error+")")
	}
	if s := p.shortText(); s != "" {
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// shortText names the short sizes, grouped by how many repeats they have,
// the most first.
func (p *Partial) shortText() string {
	byCount := map[int][]Short{}
	var counts []int
	for _, s := range p.Short {
		if _, ok := byCount[s.Repeats]; !ok {
			counts = append(counts, s.Repeats)
		}
		byCount[s.Repeats] = append(byCount[s.Repeats], s)
	}
	slices.Sort(counts)
	slices.Reverse(counts)
	var groups []string
	for _, n := range counts {
		g := byCount[n]
		names := make([]string, 0, maxNamed)
		for _, s := range g[:min(len(g), maxNamed)] {
			name := sizeName(s.Size)
			if p.sweep {
				unit := "QPs"
				if s.QPs == 1 {
					unit = "QP"
				}
				name += fmt.Sprintf(" (%d %s)", s.QPs, unit)
			}
			names = append(names, name)
		}
		list := strings.Join(names, ", ")
		if len(g) > maxNamed {
			list += fmt.Sprintf(" and %d more", len(g)-maxNamed)
		}
		what, verb := "size", "has"
		if len(g) > 1 {
			what, verb = "sizes", "have"
		}
		if n == 0 {
			groups = append(groups, fmt.Sprintf("%s %s not measured", what, list))
			continue
		}
		groups = append(groups, fmt.Sprintf("%s %s %s %d of %d repeats", what, list, verb, n, p.RepeatsAsked))
	}
	return strings.Join(groups, "; ")
}

// maxNamed is how many sizes a group names before "and N more": a 23-size
// sweep cut short after its 4th size would otherwise fill the line.
const maxNamed = 6

// sizeName writes a size as -s takes it (64K, 1M, 8), so that the sizes to
// measure again can be given back as they are.
func sizeName(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

// PartialError refuses a comparison of partial runs (ErrPartial): one line
// that says which run and how, and how to compare anyway.
type PartialError struct {
	Base, New *Partial
}

func (e *PartialError) Error() string {
	var parts []string
	for _, s := range []struct {
		name string
		p    *Partial
	}{{"base", e.Base}, {"new", e.New}} {
		if s.p != nil {
			parts = append(parts, fmt.Sprintf("%s run is partial: %s", s.name, s.p))
		}
	}
	them := "it"
	if len(parts) > 1 {
		them = "them"
	}
	return strings.Join(parts, "; ") + "; --allow-partial compares " + them + " anyway"
}

// Is makes errors.Is(err, ErrPartial) hold.
func (e *PartialError) Is(target error) bool { return target == ErrPartial }

// partialNote is the note under the table when a partial run is compared
// all the same (AllowPartial), "" when there is nothing to add: the error
// and Ctrl-C have their own notes (settings).
func partialNote(name string, p *Partial) string {
	if p == nil || len(p.Short) == 0 {
		return ""
	}
	return fmt.Sprintf("the %s run has fewer repeats than asked: %s", name, p.shortText())
}
