package health

import (
	"os"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/doctor"
	"github.com/rdmabench/rdmabench/results"
)

// Every doctor check has a code of its own, codes are unique and in
// table order: a script keyed on a code never sees it change meaning.
func TestCodesCoverDoctor(t *testing.T) {
	seen := map[Code]bool{}
	for i, c := range Codes {
		if seen[c.Code] {
			t.Errorf("code %s twice", c.Code)
		}
		seen[c.Code] = true
		if i > 0 && c.Code <= Codes[i-1].Code {
			t.Errorf("code %s after %s", c.Code, Codes[i-1].Code)
		}
	}
	for _, check := range doctor.CheckNames {
		if code := codeOf(check); code == "RB199" {
			t.Errorf("doctor check %s has no code", check)
		}
	}
	if codeOf("nccl.log.socket_fallback") != "RB170" || codeOf("no.such.check") != "RB199" {
		t.Error("nccl.log.* or unknown checks")
	}
}

func TestStatusAndReason(t *testing.T) {
	var r Report
	if r.Status() != results.Healthy || r.Reason() != "" {
		t.Fatalf("empty report: %v %q", r.Status(), r.Reason())
	}
	r.AddUnchecked("bw.loopback", "", "a captured tree: nothing to measure")
	if r.Status() != results.CannotCheck || r.Reason() != "rdmabench: RB901 a captured tree: nothing to measure" {
		t.Errorf("unchecked: %v %q", r.Status(), r.Reason())
	}
	r.AddDoctor(&doctor.Report{Findings: []doctor.Finding{
		{Check: "port.state", Status: doctor.Fail, Subject: "mlx5_1:1", Value: "DOWN, Disabled"},
		{Check: "host.memlock", Status: doctor.Warn, Subject: "host", Value: "64 KiB"},
		{Check: "port.rate", Status: doctor.Fail, Subject: "mlx5_0:1", Value: `100 Gb/sec "4X EDR", want 200` + "\n"},
	}})
	r.AddMeasurement(Measurement{Check: "bw.loopback", Subject: "mlx5_0:1", Value: 41.5, Unit: "Gb/s", Expected: 90, MinShare: 0.9, Source: "--expect-bw"}, "RB201", "RB202")
	r.AddMeasurement(Measurement{Check: "bw.loopback", Subject: "mlx5_2:1", Value: 85, Unit: "Gb/s", Expected: 90, MinShare: 0.9, Source: "--expect-bw"}, "RB201", "RB202")
	if r.Status() != results.Unhealthy || len(r.Faults) != 3 {
		t.Fatalf("faults %+v", r.Faults)
	}
	want := "rdmabench: RB110 mlx5_1:1 DOWN, Disabled; RB111 mlx5_0:1 100 Gb/sec 4X EDR , want 200; RB201 mlx5_0:1 41.5 Gb/s, below 90% of 90 (--expect-bw)"
	if got := r.Reason(); got != want {
		t.Errorf("reason\n%q, want\n%q", got, want)
	}
}

// However many faults and however long, the line stays one line within
// MaxReason and says how many it left out.
func TestReasonBounded(t *testing.T) {
	var r Report
	for i := 0; i < 40; i++ {
		r.Faults = append(r.Faults, Fault{Code: "RB150", Subject: "mlx5_0:1", Detail: "symbol_error 12 grew by 3 in 10s"})
	}
	got := r.Reason()
	if len(got) > MaxReason || !strings.HasPrefix(got, results.HealthReasonPrefix) || !strings.HasSuffix(got, " more") || strings.ContainsAny(got, "\n\"") {
		t.Errorf("%d bytes: %q", len(got), got)
	}
	long := Report{Faults: []Fault{{Code: "RB199", Detail: strings.Repeat("µ", 300)}, {Code: "RB201", Detail: "x"}}}
	got = long.Reason()
	if len(got) > MaxReason || !strings.HasSuffix(got, "; +1 more") || !strings.HasPrefix(got, "rdmabench: RB199 µµ") {
		t.Errorf("%d bytes: %q", len(got), got)
	}
	for _, r := range strings.TrimSuffix(got, "; +1 more") {
		if r == '\uFFFD' {
			t.Errorf("a character was cut: %q", got)
		}
	}
}

// A failed measurement is its own fault; a figure without an expectation
// is reported and judges nothing.
func TestMeasurementWithoutExpectation(t *testing.T) {
	var r Report
	r.AddMeasurement(Measurement{Check: "bw.loopback", Subject: "rxe0:1", Value: 0.1, Unit: "Gb/s"}, "RB201", "RB202")
	if r.Status() != results.Healthy || len(r.Measurements) != 1 {
		t.Errorf("%+v", r)
	}
	r.AddMeasurement(Measurement{Check: "nccl.allreduce", Subject: "host", Err: "ncclbench: exit 3: NCCL error"}, "RB211", "RB212")
	if r.Status() != results.Unhealthy || r.Faults[0].Code != "RB212" {
		t.Errorf("%+v", r.Faults)
	}
}

// The docs' table (docs/health.md) is the code's: every code, its check and
// its words.
func TestDocsTable(t *testing.T) {
	b, err := os.ReadFile("../docs/health.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Codes {
		check := ""
		if c.Check != "" {
			check = "`" + c.Check + "`"
		}
		row := "| `" + string(c.Code) + "` | " + check + " | " + c.What + " |"
		if !strings.Contains(string(b), row) {
			t.Errorf("docs/health.md lacks the row %s", row)
		}
	}
}

// The Ethernet side's FAILs drain the node under their own codes; its
// WARNs (a slow link, old errors) do not.
func TestEthernetFaults(t *testing.T) {
	var r Report
	r.AddDoctor(&doctor.Report{Findings: []doctor.Finding{
		{Check: "eth.pfc", Status: doctor.Fail, Subject: "mlx5_0/eth2", Value: "PFC off on priority 3"},
		{Check: "eth.errors", Status: doctor.Fail, Subject: "mlx5_0/eth2", Value: "growing over 10s: rx_crc_errors_phy +4"},
		{Check: "eth.optics", Status: doctor.Fail, Subject: "mlx5_1/eth3", Value: "rx power lane 2 -20.00 dBm (low alarm -14.40)"},
		{Check: "eth.link", Status: doctor.Warn, Subject: "mlx5_0/eth2", Value: "100G, the port supports 200G"},
	}})
	want := []Code{"RB183", "RB186", "RB190"}
	if len(r.Faults) != len(want) {
		t.Fatalf("faults %+v", r.Faults)
	}
	for i, f := range r.Faults {
		if f.Code != want[i] {
			t.Errorf("%s: code %s, want %s", f.Check, f.Code, want[i])
		}
	}
	if !strings.HasPrefix(r.Reason(), "rdmabench: RB183 mlx5_0/eth2 PFC off on priority 3; RB186") {
		t.Errorf("reason %q", r.Reason())
	}
}
