package ntanalyzer

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// keys lists an object's keys in the order written.
func keys(t testing.TB, raw json.RawMessage) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var ks []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return ks
}

func fields(t testing.TB, raw json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// CheckLayout checks a -J file against nccl-tests 2.19.6's writer
// (src/util.cu), field by field: names, order, nesting and value types,
// and times_us against the process rows. perIter: written with -I 1;
// nprocs: the processes of the run.
func CheckLayout(t testing.TB, file []byte, perIter bool, nprocs int) {
	t.Helper()
	top := json.RawMessage(bytes.TrimSpace(file))
	want := []string{"version", "start_time", "args", "env", "nccl_version", "config", "results", "out_of_bounds", "average_bus_bandwidth", "errors", "end_time"}
	if got := keys(t, top); !reflect.DeepEqual(got, want) {
		t.Fatalf("top-level keys %q, want %q", got, want)
	}
	f := fields(t, top)
	if string(f["version"]) != "3" || !bytes.HasPrefix(f["start_time"], []byte(`"20`)) || len(f["start_time"]) != len(`"2006-01-02 15:04:05"`) {
		t.Errorf("version %s start_time %s", f["version"], f["start_time"])
	}
	checkConfig(t, f["config"], perIter)
	var results []json.RawMessage
	json.Unmarshal(f["results"], &results)
	if len(results) == 0 {
		t.Fatal("no results")
	}
	for _, r := range results {
		checkResult(t, r, perIter, nprocs)
	}
	oob := fields(t, f["out_of_bounds"])
	if got := keys(t, f["out_of_bounds"]); !reflect.DeepEqual(got, []string{"count", "okay"}) || (string(oob["okay"]) != `"true"` && string(oob["okay"]) != `"false"`) {
		t.Errorf("out_of_bounds %s", f["out_of_bounds"])
	}
	if got := keys(t, f["average_bus_bandwidth"]); !reflect.DeepEqual(got, []string{"bandwidth", "okay"}) {
		t.Errorf("average_bus_bandwidth %s", f["average_bus_bandwidth"])
	}
}

// checkConfig: the config object's keys in nccl-tests' order (step_bytes
// for step_factor where the sizes step by bytes), its booleans as
// strings, and each device's keys.
func checkConfig(t testing.TB, config json.RawMessage, perIter bool) {
	t.Helper()
	cfgKeys := []string{"nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "step_factor", "warmup_iters", "iterations", "aggregated_iterations",
		"validation", "graph", "blocking_collectives", "per_iter_timing", "per_iter_skip", "parallel_init", "devices"}
	cfg := fields(t, config)
	got := keys(t, config)
	if len(got) > 4 && got[4] == "step_bytes" {
		cfgKeys[4] = "step_bytes"
	}
	if !reflect.DeepEqual(got, cfgKeys) {
		t.Errorf("config keys %q, want %q", got, cfgKeys)
	}
	for _, k := range []string{"blocking_collectives", "per_iter_timing", "parallel_init"} {
		if s := string(cfg[k]); s != `"true"` && s != `"false"` {
			t.Errorf("config.%s = %s: nccl-tests writes booleans as strings", k, s)
		}
	}
	if wantPI := map[bool]string{true: `"true"`, false: `"false"`}[perIter]; string(cfg["per_iter_timing"]) != wantPI {
		t.Errorf("per_iter_timing %s", cfg["per_iter_timing"])
	}
	var devs []json.RawMessage
	json.Unmarshal(cfg["devices"], &devs)
	if len(devs) == 0 {
		t.Error("no devices")
	}
	for _, d := range devs {
		if got := keys(t, d); !reflect.DeepEqual(got, []string{"rank", "group", "pid", "hostname", "device", "device_hex", "device_info"}) {
			t.Errorf("device keys %q", got)
		}
	}
}

// checkResult: one result's keys (with the per-iteration objects under
// -J's per-iteration timing), its root as a %6i string, and each half's.
func checkResult(t testing.TB, r json.RawMessage, perIter bool, nprocs int) {
	t.Helper()
	rk := []string{"size", "count", "type", "redop", "root", "out_of_place", "in_place", "actual_iterations", "experiment_name"}
	if perIter {
		rk = []string{"size", "count", "type", "redop", "root", "out_of_place", "out_of_place_per_iter", "in_place", "in_place_per_iter", "actual_iterations", "experiment_name"}
	}
	if got := keys(t, r); !reflect.DeepEqual(got, rk) {
		t.Fatalf("result keys %q, want %q", got, rk)
	}
	rf := fields(t, r)
	var root string
	if json.Unmarshal(rf["root"], &root) != nil || len(root) != 6 {
		t.Errorf("root %s: nccl-tests writes a %%6i string", rf["root"])
	}
	for _, h := range []string{"out_of_place", "in_place"} {
		if got := keys(t, rf[h]); !reflect.DeepEqual(got, []string{"time", "alg_bw", "bus_bw", "nwrong"}) {
			t.Errorf("%s keys %q", h, got)
		}
		if perIter {
			checkPerIter(t, h, rf[h+"_per_iter"], nprocs)
		}
	}
}

// checkPerIter: a half's per-iteration object, and with several processes
// each iteration's time the maximum over the processes' rows.
func checkPerIter(t testing.TB, half string, pi json.RawMessage, nprocs int) {
	t.Helper()
	pk := []string{"skipped_iterations", "min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us", "cv_pct", "times_us"}
	if nprocs > 1 {
		pk = append(pk, "per_process_max_times_us")
	}
	if got := keys(t, pi); !reflect.DeepEqual(got, pk) {
		t.Errorf("%s_per_iter keys %q, want %q", half, got, pk)
	}
	var p struct {
		Times []float64   `json:"times_us"`
		Procs [][]float64 `json:"per_process_max_times_us"`
	}
	json.Unmarshal(pi, &p)
	if nprocs > 1 && len(p.Procs) != nprocs {
		t.Errorf("%d process rows, want %d", len(p.Procs), nprocs)
	}
	for i, v := range p.Times {
		m := 0.0
		for _, row := range p.Procs {
			m = max(m, row[i])
		}
		if nprocs > 1 && m != v {
			t.Errorf("times_us[%d] = %v, max over processes %v", i, v, m)
		}
	}
}
