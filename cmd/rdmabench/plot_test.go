package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

func TestPlotCommand(t *testing.T) {
	dir := t.TempDir()
	base := saved(t, dir, "base.json", results.WriteBW, 90)
	today := saved(t, dir, "today.json", results.WriteBW, 80)
	meshDoc := filepath.Join(dir, "mesh.json")
	os.WriteFile(meshDoc, []byte(`{"kind":"rdmabench-mesh","schema":1,"ranks":[{"rank":0},{"rank":1},{"rank":2}],
		"pairs":[{"from":0,"to":1,"bw_gbps":90,"lat_p50_us":2},{"from":1,"to":0,"bw_gbps":40,"lat_p50_us":2,"slow_bw":true},{"from":0,"to":2,"error":"x"}]}`), 0o644)
	badMesh := filepath.Join(dir, "badmesh.json")
	os.WriteFile(badMesh, []byte(`{"kind":"rdmabench-mesh","schema":1,"ranks":[{"rank":0}],"pairs":[{"from":0,"to":5}]}`), 0o644)
	hgrm := filepath.Join(dir, "lat.hgrm")
	os.WriteFile(hgrm, []byte(" 1.0 0.0 1 1\n 1.5 0.9 9 10\n 2.5 0.99 99 100\n 9.0 1.0 100 inf\n"), 0o644)
	// rdmabench's own files say what a sample is: a send-lat file half a
	// round trip, its --rate file whole ones.
	idle, rate, rate2 := filepath.Join(dir, "lat-idle.hgrm"), filepath.Join(dir, "lat-rate1000.hgrm"), filepath.Join(dir, "lat-rate2000.hgrm")
	dist := " 1.0 0.0 1 1\n 1.5 0.9 9 10\n 9.0 1.0 100 inf\n"
	os.WriteFile(idle, []byte(dist+results.HgrmSamplePrefix+"half the round trip]\n"), 0o644)
	os.WriteFile(rate, []byte(dist+results.HgrmSamplePrefix+"open loop: from the due time]\n"), 0o644)
	os.WriteFile(rate2, []byte(dist+results.HgrmSamplePrefix+"open loop: from the due time]\n"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		want string // a message on stderr when the code is not 0
		w, h int
	}{
		{"bandwidth png", []string{"--out", filepath.Join(dir, "bw.png"), "--width", "500", "--height", "300", base, today}, 0, "", 500, 300},
		{"latency png", []string{"--out", filepath.Join(dir, "lat.png"), hgrm}, 0, "", 960, 600},
		{"svg", []string{"--out", filepath.Join(dir, "bw.svg"), base}, 0, "", 0, 0},
		{"no out", []string{base}, 2, "give --out", 0, 0},
		{"gif", []string{"--out", filepath.Join(dir, "x.gif"), base}, 2, "must end in .png or .svg", 0, 0},
		{"mixed", []string{"--out", filepath.Join(dir, "x.png"), base, hgrm}, 2, "not a mix", 0, 0},
		{"half and whole round trips", []string{"--out", filepath.Join(dir, "x.png"), idle, rate}, 2, "lat-idle and lat-rate1000 time different things", 0, 0},
		{"two rates", []string{"--out", filepath.Join(dir, "rates.png"), rate, rate2, hgrm}, 0, "", 960, 600},
		{"mesh png", []string{"--out", filepath.Join(dir, "mesh.png"), "--width", "800", "--height", "400", meshDoc}, 0, "", 800, 400},
		{"mesh svg", []string{"--out", filepath.Join(dir, "mesh.svg"), meshDoc}, 0, "", 0, 0},
		{"mesh and run", []string{"--out", filepath.Join(dir, "x.png"), meshDoc, base}, 2, "not a mix", 0, 0},
		{"two meshes", []string{"--out", filepath.Join(dir, "x.png"), meshDoc, meshDoc}, 2, "one mesh per image", 0, 0},
		{"bad mesh", []string{"--out", filepath.Join(dir, "x.png"), badMesh}, 2, "outside its 1 ranks", 0, 0},
		{"latency result", []string{"--out", filepath.Join(dir, "x.png"), saved(t, dir, "lat.json", results.SendLat, 1)}, 2, "no bandwidth results", 0, 0},
		{"tiny", []string{"--out", filepath.Join(dir, "x.png"), "--width", "5", base}, 2, "outside 100..10000", 0, 0},
		{"missing file", []string{"--out", filepath.Join(dir, "x.png"), filepath.Join(dir, "nope.json")}, 2, "no such file", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(append([]string{"plot"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d: %s", code, tt.code, errOut)
			}
			var out string
			if tt.args[0] == "--out" {
				out = tt.args[1]
			}
			if code != 0 {
				if !strings.Contains(errOut, tt.want) || strings.Count(errOut, "\n") != 1 {
					t.Errorf("stderr %q, want one line with %q", errOut, tt.want)
				}
				if _, err := os.Stat(out); out != "" && err == nil {
					t.Errorf("a refused plot left %s", out)
				}
				return
			}
			f, err := os.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if tt.w == 0 {
				b, _ := os.ReadFile(out)
				if !strings.Contains(string(b), "<svg") {
					t.Error("not an SVG")
				}
				return
			}
			img, err := png.Decode(f)
			if err != nil {
				t.Fatalf("not a PNG: %v", err)
			}
			if s := img.Bounds().Size(); s.X != tt.w || s.Y != tt.h {
				t.Errorf("PNG %v, want %dx%d", s, tt.w, tt.h)
			}
		})
	}
}
