package mesh

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestSimDump writes the documents of a fixed set of simulated meshes
// (healthy, a NIC and a host at 0.7x, on shapes of every pair class) to
// the folder RDMABENCH_MESH_SIM_DUMP names, their elapsed time zeroed:
// a change meant to make the analysis or the coordinator faster must
// leave them byte for byte as they were (diff -r a folder from before
// with one from after). Not a golden file: any change of the verdicts'
// rules changes them, as it should.
func TestSimDump(t *testing.T) {
	dir := os.Getenv("RDMABENCH_MESH_SIM_DUMP")
	if dir == "" {
		t.Skip("RDMABENCH_MESH_SIM_DUMP=folder writes the simulated meshes' documents there")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shapes := []struct {
		s     shape
		seeds int
	}{
		{shape{name: "4x4", hosts: 4, nics: 4}, 40},
		{shape{name: "8x8", hosts: 8, nics: 8}, 15},
		{shape{name: "2x2x2", hosts: 2, nics: 2, perNIC: 2}, 40},
		{shape{name: "1x1x4", hosts: 1, nics: 1, perNIC: 4, dev: "rxe"}, 20},
		{shape{name: "4x4x2", hosts: 4, nics: 4, perNIC: 2}, 10},
		{shape{name: "16x8", hosts: 16, nics: 8}, 2},
	}
	for _, sh := range shapes {
		n := sh.s.ranks()
		faults := map[string]func(f *contendedFabric){
			"healthy": func(*contendedFabric) {},
			"nic":     func(f *contendedFabric) { f.slowNIC = map[int]float64{n/2 + 1: 0.7} },
			"host":    func(f *contendedFabric) { f.slowHost = map[int]float64{sh.s.hosts - 1: 0.7} },
			"stalls":  func(f *contendedFabric) { f.stall = 0.3 },
		}
		for name, set := range faults {
			for i := range sh.seeds {
				m := contendedMesh(sh.s, uint64(i)*7919+uint64(n), set)
				m.ElapsedS = 0
				b, err := json.MarshalIndent(m, "", " ")
				if err != nil {
					t.Fatal(err)
				}
				file := filepath.Join(dir, fmt.Sprintf("%s-%s-%d.json", sh.s.name, name, i))
				if err := os.WriteFile(file, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}
