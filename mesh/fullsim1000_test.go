package mesh

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

// TestFullMesh1000 is a full mesh of 1000 ranks (125 hosts of 8 NICs)
// under the contention-and-stall noise of TestContention (issue 47 item
// 6): healthy, it exits 0 in at least 99% of meshes; a NIC at 0.7x is
// named as its NIC in at least 95%. A mesh of a million directions takes
// about 10 CPU seconds here: the default run simulates one of each
// (-short none), RDMABENCH_MESH_SIM_1000=N runs N of each.
// envInt is the variable name as an integer of at least least (def when
// it is not set); anything else fails the test saying what it should be.
func envInt(t *testing.T, name string, def, least int, want string) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return max(def, least)
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < least {
		t.Fatalf("%s=%q: %s", name, v, want)
	}
	return k
}

func TestFullMesh1000(t *testing.T) {
	meshes := envInt(t, "RDMABENCH_MESH_SIM_1000", 0, 1, "a count")
	if os.Getenv("RDMABENCH_MESH_SIM_1000") == "" && testing.Short() {
		t.Skip("-short: RDMABENCH_MESH_SIM_1000=N runs N 1000-rank full meshes of each kind")
	}
	// RDMABENCH_MESH_SIM_1000_FIRST=K starts at mesh K, so that runs
	// stopped at a deadline add meshes instead of repeating their seeds.
	first := envInt(t, "RDMABENCH_MESH_SIM_1000_FIRST", 0, 0, "a mesh number")
	t.Parallel()
	s := shape{name: "1000 ranks, 125 hosts x 8 NICs", hosts: 125, nics: 8}
	n := s.ranks()
	var clean, found int
	for i := first; i < first+meshes; i++ {
		start := time.Now()
		seed := uint64(i)*7919 + 1000*104729
		var f0 *contendedFabric
		m := contendedMesh(s, seed, func(f *contendedFabric) { f0 = f })
		ok := render.MeshClean(m)
		if ok {
			clean++
		}
		t.Logf("healthy mesh %d: clean %v, %d lone latency outliers, %d retests taking %v, %d inconclusive, %d not retested, %v", i, ok,
			m.LoneLatency, retested(m), f0.clock().Round(time.Second), len(m.Inconclusive), m.NotRetested, time.Since(start).Round(time.Second))
		nic := n/2 + 1
		m = contendedMesh(s, seed+1, func(f *contendedFabric) { f.slowNIC = map[int]float64{nic: 0.7} })
		named := len(m.Culprits) == 1 && m.Culprits[0].Rank == nic && len(m.Hosts)+len(m.Links) == 0
		if named {
			found++
		}
		t.Logf("NIC at 0.7x, mesh %d: named %v (%s)", i, named, fmt.Sprint(m.Culprits))
	}
	pct := func(k int) float64 { return 100 * float64(k) / float64(meshes) }
	t.Logf("1000 ranks: healthy exit 0 in %d of %d (%.1f%%), a NIC at 0.7x named in %d of %d (%.1f%%)", clean, meshes, pct(clean), found, meshes, pct(found))
	if pct(clean) < 99 {
		t.Errorf("healthy exit 0 in %.1f%% of %d meshes, fewer than 99%%", pct(clean), meshes)
	}
	if pct(found) < 95 {
		t.Errorf("a NIC at 0.7x named in %.1f%% of %d meshes, fewer than 95%%", pct(found), meshes)
	}
}

// retested counts the mesh's retested directions, controls included.
func retested(m *results.Mesh) int {
	k := 0
	for _, p := range m.Pairs {
		if p.Retest != nil {
			k++
		}
	}
	return k
}
