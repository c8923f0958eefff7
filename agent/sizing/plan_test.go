package sizing

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/agent/metrics"
	"github.com/rdmabench/rdmabench/agent/pinglist"
	"github.com/rdmabench/rdmabench/internal/golden"
)

func TestMake(t *testing.T) {
	cases := []struct {
		name                     string
		in                       Input
		tors, torPeers, remote   int
		rate, sent               float64
		detectTypical, detectMax time.Duration
	}{
		{"the issue's fabric", DefaultInput(10000, 32), 313, 31, 8, 10, 390, 1300 * time.Millisecond, 2350 * time.Millisecond},
		{"one ToR: no remote peers", DefaultInput(16, 16), 1, 15, 0, 10, 150, 1300 * time.Millisecond, 2350 * time.Millisecond},
		{"k capped by the other ToRs", func() Input { in := DefaultInput(12, 8); in.K = 20; return in }(), 2, 7, 4, 10, 110, 1300 * time.Millisecond, 2350 * time.Millisecond},
		{"over the budget: the rate lowered", func() Input { in := DefaultInput(10000, 64); in.Budget = 355; return in }(), 157, 63, 8, 5, 355, 1550 * time.Millisecond, 2650 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.in.Validate(); err != nil {
				t.Fatal(err)
			}
			p := Make(c.in)
			if p.ToRs != c.tors || p.ToRPeers != c.torPeers || p.RemotePeers != c.remote {
				t.Errorf("%d ToRs, %d+%d peers; want %d, %d+%d", p.ToRs, p.ToRPeers, p.RemotePeers, c.tors, c.torPeers, c.remote)
			}
			if p.Rate != c.rate || p.Sent != c.sent || p.Sent > c.in.Budget {
				t.Errorf("rate %g, sent %g (budget %g); want %g, %g", p.Rate, p.Sent, c.in.Budget, c.rate, c.sent)
			}
			if p.AnsweredP999 < p.Answered || c.in.Nodes-c.in.ToRSize > c.in.K && p.AnsweredP999 == p.Answered { // more than K could draw it
				t.Errorf("answered %g on average, %g at the 99.9th percentile", p.Answered, p.AnsweredP999)
			}
			if p.DetectTypical != c.detectTypical || p.DetectWorst != c.detectMax {
				t.Errorf("detection %v, at most %v; want %v, %v", p.DetectTypical, p.DetectWorst, c.detectTypical, c.detectMax)
			}
		})
	}
}

func TestPoissonQuantile(t *testing.T) {
	// P(X ≤ 17) = 0.9987, P(X ≤ 18) = 0.9993 for Poisson(8).
	for _, c := range []struct {
		mean, q float64
		want    int
	}{{8, 0.999, 18}, {8, 0.5, 8}, {0, 0.999, 0}, {1, 0.3, 0}} {
		if got := poissonQuantile(c.mean, c.q); got != c.want {
			t.Errorf("Poisson(%g) at %g: %d, want %d", c.mean, c.q, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	bad := map[string]func(in *Input){
		"--plan 1 outside 2..1048576 nodes":                func(in *Input) { in.Nodes = 1 },
		"--tor-size 200 outside 1..100 (the nodes)":        func(in *Input) { in.ToRSize = 200 },
		"--k -1 outside 0..1024":                           func(in *Input) { in.K = -1 },
		"--rate 0 outside (0, 1000] probes a second":       func(in *Input) { in.Rate = 0 },
		"--rate NaN outside (0, 1000] probes a second":     func(in *Input) { in.Rate = nan() },
		"--budget -5 outside (0, 4096000] probes a second": func(in *Input) { in.Budget = -5 },
		"--redraw 1ms below the period 1s":                 func(in *Input) { in.Redraw = time.Millisecond },
	}
	for want, f := range bad {
		in := DefaultInput(100, 10)
		f(&in)
		if err := in.Validate(); err == nil || err.Error() != want {
			t.Errorf("%v, want %q", err, want)
		}
	}
}

func nan() float64 { z := 0.0; return z / z }

func TestText(t *testing.T) {
	for name, in := range map[string]Input{
		"plan-10000-32.txt": DefaultInput(10000, 32),
		"plan-6-2.txt":      DefaultInput(6, 2),
	} {
		var b bytes.Buffer
		if err := Make(in).WriteText(&b); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, name, b.Bytes())
	}
}

// The plan's series an agent are what an agent with that pinglist
// exports, counted sample by sample as Prometheus stores them.
func TestSeriesPerAgentIsAScrape(t *testing.T) {
	p := Make(DefaultInput(10000, 32))
	m := metrics.New(metrics.Local{Host: "n0"}, metrics.ClockCPU)
	var peers []metrics.Peer
	for i := range p.ToRPeers + p.RemotePeers {
		scope := pinglist.ScopeToR
		if i >= p.ToRPeers {
			scope = pinglist.ScopeRemote
		}
		peers = append(peers, metrics.Peer{Addr: fmt.Sprintf("n%d:9100", i+1), Host: fmt.Sprintf("n%d", i+1), Scope: scope})
	}
	if err := m.SetPeers(peers); err != nil {
		t.Fatal(err)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			if h := s.GetHistogram(); h != nil {
				n += len(h.GetBucket()) + 3 // and +Inf, _sum, _count
			} else {
				n++
			}
		}
	}
	if n != p.SeriesPerAgent {
		t.Errorf("an agent of %d peers exports %d series, the plan says %d", len(peers), n, p.SeriesPerAgent)
	}
}
