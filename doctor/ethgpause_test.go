package doctor

import (
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/ethside"
)

// Global pause against PFC: both on is a misconfiguration (WARN on
// eth.globalpause); global pause alone is lossless, so eth.pfc WARNs
// instead of FAILing; neither stays eth.pfc's FAIL. Each case gives the
// verdicts of both checks, so that a judgement contradicting the other
// fails.
func TestGlobalPauseJudgements(t *testing.T) {
	noPFC, pfc3, pfc4 := &[8]bool{}, &[8]bool{3: true}, &[8]bool{4: true}
	pause := func(rx, tx bool) *ethside.Pause {
		return &ethside.Pause{Source: "ethtool-a.eth2.txt", Autoneg: ptr(false), RX: &rx, TX: &tx}
	}
	cases := []struct {
		name         string
		pfc          *[8]bool // nil: PFC not shown
		pause        *ethside.Pause
		pfcStatus    Status
		pfcHas       string
		gpStatus     Status
		gpHas        string
		remedyHasAny string // in the WARN's or FAIL's remedy
	}{
		{"pfc on 3, pause off", pfc3, pause(false, false), Pass, "PFC on priorities 3", Pass, "global pause rx off, tx off", ""},
		{"pfc on 3 and pause on", pfc3, pause(true, true), Pass, "PFC on priorities 3", Warn, "beside PFC on priorities 3", "ethtool -A eth2 rx off tx off"},
		{"pfc on 3 and pause rx only", pfc3, pause(true, false), Pass, "", Warn, "rx on, tx off (autoneg off) beside PFC", "ethtool -A eth2 rx off tx off"},
		{"pfc on 4 only and pause on", pfc4, pause(true, true), Fail, "PFC off on priority 3", Warn, "beside PFC on priorities 4", "--pfc 0,0,0,1,1,0,0,0"},
		{"no pfc, pause on both ways", noPFC, pause(true, true), Warn, "lossless by global pause", Info, "lossless by global pause", "--pfc 0,0,0,1,0,0,0,0"},
		{"no pfc, pause rx only", noPFC, pause(true, false), Fail, "PFC off on priority 3", Info, "nothing shown makes the link lossless", "--pfc 0,0,0,1,0,0,0,0"},
		{"no pfc, pause off", noPFC, pause(false, false), Fail, "PFC off on priority 3", Info, "nothing shown makes the link lossless", "--pfc"},
		{"pfc not shown, pause on", nil, pause(true, true), Skip, "", Info, "PFC not shown", ""},
		{"pfc not shown, pause off", nil, pause(false, false), Skip, "", Pass, "rx off, tx off (autoneg off)", ""},
		{"pause not shown", noPFC, nil, Fail, "PFC off on priority 3", Skip, "ethtool -a", "--pfc"},
		{"pause half shown", noPFC, &ethside.Pause{RX: ptr(true)}, Fail, "PFC off", Info, "rx on, tx not shown", "--pfc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			i := cloneIface(healthyIface())
			i.DCB.PFCEnabled, i.Pause = c.pfc, c.pause
			got := runEthernet(t, tc106, 0, i)
			var remedies []string
			for _, w := range []struct {
				check  string
				status Status
				has    string
			}{{"eth.pfc", c.pfcStatus, c.pfcHas}, {"eth.globalpause", c.gpStatus, c.gpHas}} {
				f := findCheck(got, w.check)
				if f.Status != w.status || !strings.Contains(f.Value, w.has) {
					t.Errorf("%s: %s %q, want %s with %q", w.check, f.Status, f.Value, w.status, w.has)
				}
				if (f.Status == Warn || f.Status == Fail) != (f.Remedy != "") {
					t.Errorf("%s %s with remedy %q", w.check, f.Status, f.Remedy)
				}
				remedies = append(remedies, f.Remedy)
			}
			if !strings.Contains(strings.Join(remedies, "\n"), c.remedyHasAny) {
				t.Errorf("remedies %q, want one with %q", remedies, c.remedyHasAny)
			}
		})
	}
}

// findCheck is the finding of check; a zero Finding when there is none.
func findCheck(got []Finding, check string) Finding {
	for _, f := range got {
		if f.Check == check {
			return f
		}
	}
	return Finding{}
}
