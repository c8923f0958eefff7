package render

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rdmabench/rdmabench/compare"
	"github.com/rdmabench/rdmabench/internal/golden"
	"github.com/rdmabench/rdmabench/results"
)

func TestCompareGolden(t *testing.T) {
	figs := func(g ...float64) []results.Figures {
		var f []results.Figures
		for _, x := range g {
			f = append(f, results.Figures{BWAvgGbps: x})
		}
		return f
	}
	base := &results.Run{Test: results.WriteBW, Device: "mlx5_0", Results: []results.Result{
		{Size: 8, QPs: 1, BWAvgGbps: 0.5},
		{Size: 4096, QPs: 1, BWAvgGbps: 100, Repeats: figs(99.9, 100, 100.1)},
		{Size: 65536, QPs: 1, BWAvgGbps: 100},
	}}
	cur := &results.Run{Test: results.WriteBW, Device: "mlx5_0", Error: "size 1048576: server: gone", Results: []results.Result{
		{Size: 4096, QPs: 1, BWAvgGbps: 95, Repeats: figs(94.9, 95, 95.1)},
		{Size: 65536, QPs: 1, BWAvgGbps: 103},
		{Size: 1048576, QPs: 1, BWAvgGbps: 180},
	}}
	// The new run's error would refuse it as partial: the table is what
	// --allow-partial shows.
	o := compare.DefaultOptions
	o.AllowPartial = true
	rep, err := compare.Runs(base, cur, o)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := CompareText(&b, rep); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "compare.txt", b.Bytes())
	b.Reset()
	if err := CompareJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	var back compare.Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.Regressions != 2 || back.Missing != 1 || len(back.Rows) != 4 {
		t.Errorf("JSON read back: %v, %+v", err, back)
	}
}

func TestCompareMeshGolden(t *testing.T) {
	base := fixtureMesh()
	cur := fixtureMesh()
	cur.Pairs[0].BWGbps = 80   // 0->1 slower
	cur.Pairs[1].LatP50us = 4  // 1->0 slower ping-pong
	cur.Pairs[6].BWGbps = 97.5 // 3->0 faster
	rep, err := compare.Meshes(base, cur, compare.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := CompareMeshText(&b, rep); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "compare-mesh.txt", b.Bytes())
}
