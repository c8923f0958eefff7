package render

import (
	"bytes"
	"math"
	"strings"
	"testing"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rdmabench/rdmabench/internal/golden"
	"github.com/rdmabench/rdmabench/results"
)

// textTable renders a run as the client prints it: header, each row (with
// its interval lines first, as they arrive during the measurement), footer.
func textTable(t *testing.T, r *results.Run, o TextOptions) []byte {
	t.Helper()
	var b bytes.Buffer
	tab := Table{W: &b, Opts: o}
	if err := tab.Start(r); err != nil {
		t.Fatal(err)
	}
	for _, res := range r.Results {
		for _, iv := range res.Intervals {
			tab.Interval(res.Size, iv)
		}
		if err := tab.Measured(r, res); err != nil {
			t.Fatal(err)
		}
	}
	if err := tab.End(r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The golden files were written by the text and JSON reports as they were in
// engine/ before results got their own packages: the move changed no byte.
func TestTextAndJSONGolden(t *testing.T) {
	for name, r := range fixtureRuns() {
		for _, o := range []struct {
			suffix string
			opts   TextOptions
		}{{"", TextOptions{}}, {"-gbits-perqp-cpu", TextOptions{Gbits: true, PerQP: true, CPU: true}}} {
			golden.Check(t, name+o.suffix+".txt", textTable(t, r, o.opts))
		}
		var j bytes.Buffer
		if err := JSON(&j, r); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, name+".json", j.Bytes())
	}
}

func TestCountersText(t *testing.T) {
	got := countersText(map[string]uint64{"rcvd_seq_err": 4, "duplicate_request": 3, "link_downed": 1})
	if got != "duplicate_request +3, link_downed +1, rcvd_seq_err +4" {
		t.Errorf("text %q", got)
	}
}

// Loss shows in latency runs as retransmissions: their rows carry the
// counters too.
func TestLatencyRowShowsCounters(t *testing.T) {
	run := &results.Run{Test: results.SendLat}
	res := results.Result{Size: 64, Iterations: 10, Lat: &results.LatencyStats{Min: 1, Max: 2, P50: 1, Mean: 1, P99: 2, P99_9: 2, P99_99: 2},
		PortCounters: map[string]uint64{"completer_retry_err": 3}, PeerPortCounters: map[string]uint64{"duplicate_request": 2}}
	var b bytes.Buffer
	if err := TextRow(&b, run, res, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "     port counters moved: completer_retry_err +3\n     peer port counters moved: duplicate_request +2\n") {
		t.Errorf("latency row:\n%s", b.String())
	}
}

func TestGbpsToMiBps(t *testing.T) {
	if got := gbpsToMiBps(8 * 1.048576); math.Abs(got-1000) > 1e-9 {
		t.Errorf("gbpsToMiBps = %v", got)
	}
}

func TestHgrm(t *testing.T) {
	h := hdrhistogram.New(1, 3600e9, 3)
	for _, v := range []int64{1000, 2000, 3000, 50000} {
		h.RecordValue(v)
	}
	var b bytes.Buffer
	if err := Hgrm(&b, h, "half the round trip [as perftest]"); err != nil || !strings.Contains(b.String(), "Percentile") || !strings.Contains(b.String(), "50.015") {
		t.Errorf("hgrm: %v\n%s", err, b.String())
	}
	// The file says what a sample is, and reads back with it.
	back, err := results.ReadHgrm(bytes.NewReader(b.Bytes()))
	if err != nil || back.Sample != "half the round trip (as perftest)" || len(back.Percentiles) == 0 {
		t.Errorf("read back: %v %+v", err, back)
	}
}

// The --rate series sit under their latency row, beside the idle figures in
// the same units, with the knee and rates not reached named.
func TestLatencyRowShowsRates(t *testing.T) {
	run := &results.Run{Test: results.SendLat}
	idle := results.LatencyStats{Min: 20, P50: 30, P90: 35, P99: 40, P99_9: 50, P99_99: 60, Max: 61}
	res := results.Result{Size: 2, Iterations: 10, Lat: &results.LatencyStats{P50: 15, P99: 20}, RateIdle: &idle,
		Rates: []results.RateSeries{
			{Rate: 1000, Achieved: 1000, Reached: true, Iterations: 1000, Lat: results.LatencyStats{P50: 31, P99: 45}, Uncorrected: results.LatencyStats{P99: 44}},
			{Rate: 10000, Achieved: 9990, Reached: true, Knee: true, Iterations: 1000, Lat: results.LatencyStats{P50: 40, P99: 95}, Uncorrected: results.LatencyStats{P99: 70}},
			{Rate: 10000000, Achieved: 31250, Iterations: 400, Lat: results.LatencyStats{P50: 9000, P99: 20000}, Uncorrected: results.LatencyStats{P99: 300}},
			// Cut before the end of its warm-up: a rate, no latencies.
			{Rate: 90000000, Achieved: 31000},
		}}
	var b bytes.Buffer
	if err := TextRow(&b, run, res, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"     idle         closed loop  30.000     35.000     40.000     50.000     60.000     61.000",
		"     1000         1000         31.000",
		"     10000        9990         40.000     0.000      95.000",
		"← knee: p99 > 2× idle p99",
		"     10000000     31250        9000.000",
		"← rate not reached (achieved 31250/s)",
		"     90000000     31000        -          -          -          -          -          -          -             ← rate not reached (achieved 31000/s); no samples past the warm-up",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Count(out, "←") != 3 {
		t.Errorf("want three marks (knee, two not reached):\n%s", out)
	}
}
