package mesh

import "testing"

func TestZZDebug(t *testing.T) {
	s := shape{name: "64", hosts: 8, nics: 8}
	for i := 0; i < 200; i++ {
		m := contendedMesh(s, uint64(i)*7919+64*104729, func(f *contendedFabric) {})
		if len(m.Inconclusive) == 0 {
			continue
		}
		t.Logf("mesh %d notretested %d inconclusive %d", i, m.NotRetested, len(m.Inconclusive))
		for _, d := range m.Inconclusive {
			for _, p := range m.Pairs {
				if p.From == d.From && p.To == d.To {
					t.Logf("  %d->%d class %v first %+v retest %+v", d.From, d.To, p.Class, p.MeshFigures, p.Retest)
				}
			}
		}
	}
}
