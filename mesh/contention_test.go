package mesh

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

// contendedFabric is the noise users have on shared hosts, as a Runner:
// every measurement its direction's true figure times exp(jitter·Z); the
// pairs that run at once on one host slow each other, by a random factor
// drawn once a round and host and so shared by both directions of every
// pair of that host in that round (what the two directions' difference
// cannot show); and scheduler stalls hit a latency now and then. Retests
// run alone: jitter and stalls, no contention.
type contendedFabric struct {
	n      int
	seed   uint64
	jitter float64
	host   []int // rank → host
	// pairsOn[round][host] is how many pairs of the round touch the host.
	pairsOn []map[int]int
	// contention is the most a round's sharing slows a pair's bandwidth
	// (0.3: by up to 30%); its latency rises by up to latRise times it.
	contention, latRise float64
	// stall is the chance that a measurement's latency is hit by a stall,
	// which raises it by up to stallRise times.
	stall, stallRise float64
	slowNIC          map[int]float64 // rank → bandwidth factor
	slowHost         map[int]float64 // host → bandwidth factor
	// cls and speed: each pair class's bandwidth (its latency divided by
	// it), as real hosts have them (classSpeeds); a fault slows a pair
	// within its class.
	cls   *results.PairClasses
	speed [results.NumPairClasses]float64
	// atOnce is the coordinator's Options.RetestAtOnce; a retest beside
	// others is slowed as a round's sharing slows (by up to contention),
	// and one in twenty finds nothing completed (its client starved).
	atOnce int
	// retestTime is the retests' modelled time, in ns (simCosts).
	retestTime atomic.Int64
	// tries counts each direction's retests (retests).
	once  sync.Once
	tries []atomic.Int32
}

// simCosts are what a retest takes in the simulations: a set-up, a
// write-bw at full length, a send-lat of 1000 ping-pongs.
var simCosts = struct{ setup, bw, lat time.Duration }{300 * time.Millisecond, 2 * time.Second, 50 * time.Millisecond}

// retests counts direction d's retests, this one included.
func (f *contendedFabric) retests(d int) int32 {
	f.once.Do(func() { f.tries = make([]atomic.Int32, f.n*f.n) })
	return f.tries[d].Add(1)
}

// clock is the retests' time as the budget reads it.
func (f *contendedFabric) clock() time.Duration { return time.Duration(f.retestTime.Load()) }

// classSpeeds are the pair classes' speeds of the simulations, relative
// to a pair across hosts: ranks on one device loop back inside it (make
// demo's rxe: 0.32-0.38 Gb/s against 0.07-0.09 across hosts), a host's
// NICs through its PCIe (the 2x2 rxe mesh: 0.20 against 0.08), and a
// pair across rails crosses the spine (0.8).
var classSpeeds = [results.NumPairClasses]float64{
	results.ClassSameNIC:   4,
	results.ClassSameHost:  2.5,
	results.ClassSameRail:  1,
	results.ClassCrossRail: 0.8,
	results.ClassCrossHost: 1,
}

func (f *contendedFabric) Dead(int) (string, bool) { return "", false }

func (f *contendedFabric) Measure(_ context.Context, client int, t Task) (Outcome, error) {
	attempt := uint64(1)
	if t.Round == 0 {
		// Each retest of a direction a draw of its own: a stall that hit
		// one try need not hit the next.
		attempt = 1 + uint64(f.retests(client*f.n+t.Server))
		cost := simCosts.setup
		if t.Part.Runs(BWPart) {
			cost += simCosts.bw
		}
		if t.Part.Runs(LatPart) {
			cost += simCosts.lat
		}
		// Retests at once share their time.
		f.retestTime.Add(int64(cost) / int64(t.Beside+1))
	}
	rng := rand.New(rand.NewPCG(f.seed, (uint64(client*f.n+t.Server)<<4)|attempt))
	speed := 1.0
	if f.cls != nil {
		speed = f.speed[f.cls.Of(client, t.Server)]
	}
	slow := 1.0
	for _, r := range []int{client, t.Server} {
		if k, ok := f.slowNIC[r]; ok {
			slow = min(slow, k)
		}
		if k, ok := f.slowHost[f.host[r]]; ok {
			slow = min(slow, k)
		}
	}
	bw, lat := 100*speed*slow, 3/speed
	if t.Round > 0 {
		// The two hosts in a fixed order (a map's order made the product's
		// last bits differ from run to run of one seed).
		hosts := []int{f.host[client], f.host[t.Server]}
		if hosts[1] == hosts[0] {
			hosts = hosts[:1]
		}
		for _, h := range hosts {
			if f.pairsOn[t.Round-1][h] < 2 {
				continue
			}
			u := rand.New(rand.NewPCG(f.seed^0x9e3779b97f4a7c15, uint64(t.Round)<<20|uint64(h))).Float64()
			bw *= 1 - f.contention*u
			lat *= 1 + f.latRise*f.contention*u
		}
	}
	if t.Round == 0 && t.Beside > 0 {
		if rng.Float64() < 0.05 {
			return Outcome{Error: "write_bw: nothing completed in the measured interval", Idle: true}, nil
		}
		bw *= 1 - f.contention*rng.Float64()
	}
	if rng.Float64() < f.stall {
		lat *= 1 + f.stallRise*rng.Float64()
	}
	bw *= math.Exp(f.jitter * rng.NormFloat64())
	lat *= math.Exp(f.jitter * rng.NormFloat64())
	return partOutcome(t.Part, bw, lat), nil
}

// partOutcome is a simulated direction's outcome: the figures of the
// tests part runs (a p99 of twice the p50).
func partOutcome(part Part, bw, lat float64) Outcome {
	var out Outcome
	if part.Runs(BWPart) {
		out.BWGbps = bw
	}
	if part.Runs(LatPart) {
		out.LatP50us, out.LatP99us = lat, 2*lat
	}
	return out
}

// shape is a cluster: hosts of NICs, one rank a NIC (or perNIC).
type shape struct {
	name        string
	hosts, nics int
	perNIC      int // ranks on each NIC; 0: 1
	dev         string
	// meshes healthy, and faulty of each fault (a NIC, a host).
	meshes, faulty int
	hostFindable   bool // another host to compare a slow one with
	// nicNotJudged: no NIC has another pair of each class (2 hosts of 2
	// NICs), or the mesh has one NIC (4 ranks on it): a slow one cannot
	// be told, only never blamed wrongly.
	nicNotJudged bool
	// nicAmbiguous: a slow NIC of a host of two NICs slows every pair of
	// its host's other NIC within their classes (on 2 hosts, each of that
	// NIC's pairs is with the slow one or crosses to the other host,
	// whose pairs are all with this one): its host may be named as a
	// whole, nothing elsewhere.
	nicAmbiguous bool
}

func (s shape) ranks() int { return s.hosts * s.nics * max(1, s.perNIC) }

// slowNIC is the simulations' slow NIC: rank n/2+1's, all its ranks (or
// that rank alone), at 0.7x.
func (s shape) slowNIC(m *results.Mesh) map[int]float64 {
	n := s.ranks()
	nic := n/2 + 1
	slow := map[int]float64{}
	for r := range n {
		if r == nic || m.Ranks[r].NIC() == m.Ranks[nic].NIC() {
			slow[r] = 0.7
		}
	}
	return slow
}

// nicNamed says whether mesh m names each rank of the slow NIC as its NIC
// (as the node where its host has one NIC), and nothing else.
func (s shape) nicNamed(m *results.Mesh, slow map[int]float64) bool {
	kind := results.CulpritNIC
	if s.nics == 1 {
		kind = results.CulpritNode
	}
	ok := len(m.Culprits) == len(slow) && len(m.Hosts)+len(m.Links) == 0
	for _, c := range m.Culprits {
		_, isSlow := slow[c.Rank]
		ok = ok && isSlow && c.Kind == kind
	}
	return ok
}

// hostNamed says whether mesh m names host h, its ranks as host culprits
// (two at least), and nothing else.
func (s shape) hostNamed(m *results.Mesh, h int) bool {
	onHost := len(m.Culprits) >= 2
	for _, c := range m.Culprits {
		ch, _ := s.layout(c.Rank)
		onHost = onHost && ch == h && c.Kind == results.CulpritHost
	}
	return onHost && len(m.Hosts) == 1 && m.Hosts[0].Host == fmt.Sprintf("host%d", h) && len(m.Links) == 0
}

// layout is rank r's host and NIC index: the hosts' ranks in blocks, a
// NIC's ranks next to each other.
func (s shape) layout(r int) (host, nic int) {
	per := max(1, s.perNIC)
	return r / (s.nics * per), r / per % s.nics
}

// device is the name of NIC i.
func (s shape) device(i int) string {
	if s.dev != "" {
		return fmt.Sprintf("%s%d", s.dev, i)
	}
	return fmt.Sprintf("mlx5_%d", i)
}

// contendedMesh runs one mesh of shape s on a contended fabric set up by
// set, with the real schedule (LimitShared, no --per-host: a host's NICs'
// pairs at once) and the default rules and retests.
func contendedMesh(s shape, seed uint64, set func(f *contendedFabric)) *results.Mesh {
	n := s.ranks()
	m := newMesh(n)
	share := make([]Share, n)
	host := make([]int, n)
	for r := range n {
		h, nic := s.layout(r)
		host[r] = h
		m.Ranks[r].Host = fmt.Sprintf("host%d", host[r])
		m.Ranks[r].Device = s.device(nic)
		share[r] = Share{NIC: m.Ranks[r].NIC(), Host: m.Ranks[r].Host}
	}
	rounds := LimitShared(Tournament(n), share, 0)
	f := &contendedFabric{n: n, seed: seed, jitter: 0.05, host: host, contention: 0.15, latRise: 3, stall: 0.05, stallRise: 3,
		cls: results.NewPairClasses(m.Ranks), speed: classSpeeds}
	for _, round := range rounds {
		on := map[int]int{}
		for _, p := range round {
			on[host[p.A]]++
			if host[p.B] != host[p.A] {
				on[host[p.B]]++
			}
		}
		f.pairsOn = append(f.pairsOn, on)
	}
	set(f)
	c := &Coordinator{Runner: f, Mesh: m, Rounds: rounds, Addrs: make([]string, n),
		Opts: Options{Rules: DefaultRules, MaxRetests: -1, Controls: ControlsFor(m.Ranks, 0, 0), Clock: f.clock, RetestAtOnce: f.atOnce,
			RetestBudget: RetestBudget(time.Duration(len(rounds)) * 2 * (simCosts.setup + simCosts.bw + simCosts.lat))}}
	c.Run(context.Background())
	return m
}

// blamed says whether the mesh blames anything.
func blamed(m *results.Mesh) bool { return len(m.Culprits)+len(m.Hosts)+len(m.Links) > 0 }

// The verdicts under contention (issue 37): on each shape, a healthy
// mesh blames nothing (no culprit, host or link) in at least 99% of
// meshes, and a NIC at 0.7x is named (that rank, as its NIC, nothing
// else) and a host at 0.7x too (that host, nothing elsewhere) in at
// least 95%. RDMABENCH_MESH_SIM_MESHES sets the meshes of each shape and
// fault (default 1000, and 200 of each fault at 64 ranks; -short: 50).
//
// With the pair classes at their speeds (classSpeeds), each pair judged
// within its class (issue 47), at 03e2f5f: healthy meshes blamed in 0.3%,
// 0.2%, 0.1%, 0.0% (1 host x 4, 2 x 4, 4 x 4, 8 x 8 NICs) and 0.0% on
// the class shapes (4 ranks on one NIC, 2 x 2, 2 x 2 x 2 ranks); a NIC at
// 0.7x named in 96.8%, 97.8%, 100%, 100% (of 200); a host at 0.7x in
// 99.7%, 100%, 99.5% (of 200). On the class shapes a slow NIC cannot be
// told (every rank on it, or no NIC with another pair of its class) and
// nothing was blamed wrongly in any of 1000.
func TestContention(t *testing.T) {
	shapes := []shape{
		{name: "4 ranks on one host", hosts: 1, nics: 4, meshes: 1000, faulty: 1000},
		{name: "8 ranks, 2 hosts x 4 NICs", hosts: 2, nics: 4, meshes: 1000, faulty: 1000, hostFindable: true},
		{name: "16 ranks, 4 hosts x 4 NICs", hosts: 4, nics: 4, meshes: 1000, faulty: 1000, hostFindable: true},
		// A mesh of 64 takes a tenth of a second here: 200 of each fault.
		{name: "64 ranks, 8 hosts x 8 NICs", hosts: 8, nics: 8, meshes: 1000, faulty: 200, hostFindable: true},
		// The pair classes' shapes (issue 47): make demo's four ranks on
		// one rxe device, the 2x2 rxe mesh, and every class at once.
		{name: "4 ranks on one NIC", hosts: 1, nics: 1, perNIC: 4, dev: "rxe", meshes: 1000, faulty: 1000, nicNotJudged: true},
		{name: "4 ranks, 2 hosts x 2 NICs", hosts: 2, nics: 2, dev: "rxe", meshes: 1000, faulty: 1000, nicNotJudged: true},
		{name: "8 ranks, 2x2 NICs x 2 ranks", hosts: 2, nics: 2, perNIC: 2, meshes: 1000, faulty: 1000, nicAmbiguous: true},
	}
	if v := os.Getenv("RDMABENCH_MESH_SIM_MESHES"); v != "" {
		var k int
		if _, err := fmt.Sscan(v, &k); err != nil || k < 1 {
			t.Fatalf("RDMABENCH_MESH_SIM_MESHES=%q: a count", v)
		}
		for i := range shapes {
			shapes[i].meshes, shapes[i].faulty = k, k
		}
	} else if testing.Short() {
		for i := range shapes {
			shapes[i].meshes, shapes[i].faulty = 50, 50
		}
	}
	pct := func(k, of int) float64 { return 100 * float64(k) / float64(of) }
	// 95% of 1000 meshes; -short's 50 cannot tell 96.8% (4 ranks on one
	// host) from 95%: 3 misses of 50 are within its sampling noise.
	minPower := 95.0
	if testing.Short() && os.Getenv("RDMABENCH_MESH_SIM_MESHES") == "" {
		minPower = 90
	}
	rows := make([]string, len(shapes))
	t.Cleanup(func() {
		t.Logf("%-28s %7s  %-44s %-22s %-22s", "shape", "healthy", "healthy: false blame", "NIC at 0.7x: found", "host at 0.7x: found")
		for _, r := range rows {
			t.Log(r)
		}
	})
	for si, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			n := s.ranks()
			var falseBlame, inconclusive, notClean, nicFound, nicWrong, hostFound int
			for i := range s.meshes {
				seed := uint64(i)*7919 + uint64(n)*104729
				m := contendedMesh(s, seed, func(*contendedFabric) {})
				if blamed(m) {
					falseBlame++
				}
				if len(m.Inconclusive) > 0 {
					inconclusive++
				}
				if !render.MeshClean(m) {
					notClean++ // the command's exit 1
				}
				if i >= s.faulty {
					continue
				}
				slowRanks := s.slowNIC(m)
				m = contendedMesh(s, seed+1, func(f *contendedFabric) { f.slowNIC = slowRanks })
				slowHost, _ := s.layout(n/2 + 1)
				switch {
				case s.nicNamed(m, slowRanks):
					nicFound++
				case s.nicNotJudged && blamed(m):
					nicWrong++
				case s.nicAmbiguous:
					for _, c := range m.Culprits {
						if h, _ := s.layout(c.Rank); h != slowHost {
							nicWrong++
							break
						}
					}
					if len(m.Links) > 0 {
						nicWrong++
					}
				}
				if s.hostFindable {
					h := s.hosts - 1
					m = contendedMesh(s, seed+2, func(f *contendedFabric) { f.slowHost = map[int]float64{h: 0.7} })
					if s.hostNamed(m, h) {
						hostFound++
					}
				}
			}
			hostCol := "n/a (no other host)"
			if s.hostFindable {
				hostCol = fmt.Sprintf("%.1f%% of %d", pct(hostFound, s.faulty), s.faulty)
			}
			rows[si] = fmt.Sprintf("%-28s %7d  %-44s %-22s %-22s", s.name, s.meshes,
				fmt.Sprintf("%.1f%% (inconclusive %.1f%%, exit 1 %.1f%%)", pct(falseBlame, s.meshes), pct(inconclusive, s.meshes), pct(notClean, s.meshes)),
				fmt.Sprintf("%.1f%% of %d", pct(nicFound, s.faulty), s.faulty), hostCol)
			if pct(falseBlame, s.meshes) > 1 {
				t.Errorf("a healthy mesh blamed in %.1f%% of meshes, more than 1%%", pct(falseBlame, s.meshes))
			}
			// Issue 47: a healthy mesh exits 0 (nothing blamed, nothing
			// inconclusive, every outlier retested) in at least 99%.
			if pct(notClean, s.meshes) > 1 {
				t.Errorf("a healthy mesh exits 1 in %.1f%% of meshes, more than 1%%", pct(notClean, s.meshes))
			}
			// 4 ranks on one host come closest: 96.8% of 1000 (their few
			// partner pairs make the widest cuts).
			if s.nicNotJudged || s.nicAmbiguous {
				// Never blamed wrongly where nothing is judged; within the
				// 1% of a healthy mesh where its host may be named.
				rows[si] += fmt.Sprintf(" (NIC not told: blamed wrongly in %d)", nicWrong)
				if s.nicNotJudged && nicWrong > 0 || pct(nicWrong, s.faulty) > 1 {
					t.Errorf("a NIC that cannot be told: blamed wrongly in %d meshes", nicWrong)
				}
			} else if pct(nicFound, s.faulty) < minPower {
				t.Errorf("a NIC at 0.7x found in %.1f%% of meshes, fewer than %g%%", pct(nicFound, s.faulty), minPower)
			}
			if s.hostFindable && pct(hostFound, s.faulty) < minPower {
				t.Errorf("a host at 0.7x found in %.1f%% of meshes, fewer than %g%%", pct(hostFound, s.faulty), minPower)
			}
		})
	}
}
