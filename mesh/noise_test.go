package mesh

import (
	"context"
	"math"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

// simFabric is a fabric with known noise, as a Runner: the harness's
// fabricModel (every measurement the direction's true figure times
// exp(jitter·Z), Z standard normal, drawn from a generator seeded by the
// mesh, the direction and the attempt, so that a mesh is the same whatever
// order its goroutines run in), with a slow node at most.
type simFabric struct{ fabricModel }

func (f *simFabric) Dead(int) (string, bool) { return "", false }

func (f *simFabric) Measure(ctx context.Context, client int, t Task) (Outcome, error) {
	return f.measure(ctx, client, t), nil
}

type simVerdict struct{ falseBlame, found, inconclusive int }

// simulate runs meshes of n ranks on simulated fabrics and counts the
// meshes that blamed something healthy, found the slow node (when there
// is one, and blamed nothing else) or left an outlier inconclusive.
// screen: the rounds screen (both directions at once, √8 × the jitter:
// an eighth of the duration) and the retests run at full length.
func simulate(n, meshes int, jitter float64, slow map[int]float64, screen bool) simVerdict {
	var v simVerdict
	for i := 0; i < meshes; i++ {
		f := &simFabric{fabricModel{n: n, seed: uint64(i)*7919 + uint64(n)*104729 + uint64(jitter*1000), jitter: jitter, slowNode: slow}}
		if screen {
			f.screenJitter = jitter * math.Sqrt(8)
		}
		m := newMesh(n)
		c := &Coordinator{Runner: f, Mesh: m, Rounds: Tournament(n), Addrs: make([]string, n),
			Opts: Options{Rules: simRules, MaxRetests: 64, BothAtOnce: screen, Controls: ControlsFor(m.Ranks, 0, controlsIf(screen))}}
		c.Run(context.Background())
		wrong, found := len(m.Links) > 0, false
		for _, cu := range m.Culprits {
			if _, ok := slow[cu.Rank]; ok {
				found = true
			} else {
				wrong = true
			}
		}
		if wrong {
			v.falseBlame++
		}
		if found && !wrong {
			v.found++
		}
		if len(m.Inconclusive) > 0 {
			v.inconclusive++
		}
	}
	return v
}

// The noise model's promise, measured: on a healthy fabric at most 1% of
// meshes blame anything (a culprit or a link) at 3% and 10% jitter, and a
// node at 0.7× is found in at least 95% of meshes.
func TestNoiseModel(t *testing.T) {
	meshes := map[int]int{5: 400, 16: 200, 64: 40}
	if testing.Short() {
		meshes = map[int]int{5: 100, 16: 40, 64: 8}
	}
	pct := func(k, of int) float64 { return 100 * float64(k) / float64(of) }
	for _, n := range []int{5, 16, 64} {
		for _, jitter := range []float64{0.03, 0.10} {
			k := meshes[n]
			h := simulate(n, k, jitter, nil, false)
			s := simulate(n, k, jitter, map[int]float64{n / 2: 0.7}, false)
			t.Logf("N=%-3d jitter %2.0f%%, %d meshes: healthy: false blame %.1f%%, inconclusive %.1f%%; node at 0.7x: found %.1f%% (false blame %.1f%%)",
				n, jitter*100, k, pct(h.falseBlame, k), pct(h.inconclusive, k), pct(s.found, k), pct(s.falseBlame, k))
			if pct(h.falseBlame, k) > 1 {
				t.Errorf("N=%d jitter %.0f%%: a healthy fabric blamed in %.1f%% of meshes, more than 1%%", n, jitter*100, pct(h.falseBlame, k))
			}
			// A culprit needs a retest's confirmation or a fitted shared
			// noise, which 5 ranks are too few for: at 10% jitter a node at
			// 0.7x is found in about 94% (95% before retests were judged
			// alone, issue 37), the price of never blaming on the rounds'
			// figures alone (docs/mesh.md).
			power := 95.0
			if n < 6 && jitter > 0.05 {
				power = 90
			}
			if pct(s.found, k) < power {
				t.Errorf("N=%d jitter %.0f%%: a node at 0.7x found in %.1f%% of meshes, fewer than %.0f%%", n, jitter*100, pct(s.found, k), power)
			}
		}
	}
}

// The same promise under --screen, where it is used (16 ranks and more):
// the rounds' figures √8 times noisier and 0.55 of a direction alone, the
// outliers and 8 controls retested alone at full length. False blame stays at most 1%; the power does too, but where the
// screening pass is 28% noisy (a fabric of 10% jitter) on a small mesh:
// 16 ranks find the 0.7× node in 94.5% of meshes (at least 90% asserted),
// the price of the culprit cut that keeps 64 noisy ranks from blaming a
// healthy one (1.5% of meshes at 3.5 sigmas each; see refs.kRank).
func TestNoiseModelScreen(t *testing.T) {
	meshes := map[int]int{16: 200, 64: 200}
	if testing.Short() {
		meshes = map[int]int{16: 40, 64: 8}
	}
	pct := func(k, of int) float64 { return 100 * float64(k) / float64(of) }
	for _, n := range []int{16, 64} {
		for _, jitter := range []float64{0.03, 0.10} {
			k := meshes[n]
			h := simulate(n, k, jitter, nil, true)
			s := simulate(n, k, jitter, map[int]float64{n / 2: 0.7}, true)
			t.Logf("N=%-3d jitter %2.0f%% (screening %2.0f%%), %d meshes: healthy: false blame %.1f%%, inconclusive %.1f%%; node at 0.7x: found %.1f%% (false blame %.1f%%)",
				n, jitter*100, jitter*math.Sqrt(8)*100, k, pct(h.falseBlame, k), pct(h.inconclusive, k), pct(s.found, k), pct(s.falseBlame, k))
			if pct(h.falseBlame, k) > 1 {
				t.Errorf("N=%d jitter %.0f%%: a healthy fabric blamed in %.1f%% of screened meshes, more than 1%%", n, jitter*100, pct(h.falseBlame, k))
			}
			// 16 noisy screened ranks find it in about 87% since a culprit
			// needs its own confirmed figures (94.5% before, issue 37): the
			// node's directions that the 28% noisy pass left within the cut
			// are not retested, so they count as measured (docs/mesh.md).
			power := 95.0
			if n < 64 && jitter > 0.05 {
				power = 85
			}
			if pct(s.found, k) < power {
				t.Errorf("N=%d jitter %.0f%%: a node at 0.7x found in %.1f%% of screened meshes, fewer than %.0f%%", n, jitter*100, pct(s.found, k), power)
			}
		}
	}
}

var simRules = DefaultRules

var _ = results.MeshKind
