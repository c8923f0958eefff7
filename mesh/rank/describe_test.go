package rank

import (
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/mesh"
	"github.com/rdmabench/rdmabench/results"
)

func TestSharedNote(t *testing.T) {
	rk := func(host, dev string) results.MeshRank { return results.MeshRank{Host: host, Device: dev, Port: 1} }
	for _, tc := range []struct {
		name    string
		ranks   []results.MeshRank
		perHost int
		want    string
	}{
		{"a host each", []results.MeshRank{rk("a", "mlx5_0"), rk("b", "mlx5_0")}, 0, ""},
		{"a NIC shared", []results.MeshRank{rk("a", "rxe0"), rk("a", "rxe0"), rk("b", "rxe0")}, 0, "1 NIC shared by several ranks: its pairs run one at a time (2 rounds)"},
		{"a host's NICs", []results.MeshRank{rk("a", "mlx5_0"), rk("a", "mlx5_1"), rk("b", "mlx5_0")}, 0, "1 host with several NICs: their pairs run at once"},
		{"bounded per host", []results.MeshRank{rk("a", "mlx5_0"), rk("a", "mlx5_1")}, 3, "at most 3 of a host's pairs at once (--per-host)"},
		{"no device yet", []results.MeshRank{rk("a", ""), rk("a", "")}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sch := mesh.Schedule{Rounds: make([][]mesh.Pair, 2)}
			got := SharedNote(&results.Mesh{Ranks: tc.ranks}, sch, tc.perHost)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDescribeStatesTheSchedule: --plan's line carries the schedule's
// own figures, with and without the screening pass.
func TestDescribeStatesTheSchedule(t *testing.T) {
	sz := Sizing{BWSize: 64 << 10, LatSize: 8, BWDuration: time.Second, LatIters: 100, SetupEst: 300 * time.Millisecond}
	sch := sz.Schedule(8, nil)
	got := sz.Describe(sch)
	for _, want := range []string{"7 rounds of up to 4 pairs at once", "write-bw 64 KiB for 1s, send-lat 8 B 100 times, + 300ms set-up = 1.3s a direction", "one set of QPs on each end, which both its tests use", "expected about " + sch.Est.Round(time.Second).String()} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	sz.Screen = 250 * time.Millisecond
	if got := sz.Describe(sz.Schedule(8, nil)); !strings.Contains(got, "screening both directions of each at once") || !strings.Contains(got, "for 250ms") {
		t.Errorf("screened: %q", got)
	}
}
