package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/rdmabench/rdmabench/agent/pinglist"
	"github.com/rdmabench/rdmabench/internal/promtest"
)

func peersOf(addrs ...string) []Peer {
	var ps []Peer
	for i, a := range addrs {
		scope := pinglist.ScopeToR
		if i%2 == 1 {
			scope = pinglist.ScopeRemote
		}
		ps = append(ps, Peer{Addr: a, Host: strings.Split(a, ":")[0], ToR: "tor" + a[1:2], Scope: scope})
	}
	return ps
}

// series is every series of family name in fams, by peer label.
func byPeer(fams map[string]*dto.MetricFamily, name string) map[string]int {
	out := map[string]int{}
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == LabelPeer {
				out[l.GetValue()]++
			}
		}
	}
	return out
}

// Scraped through promhttp as Prometheus would, the families are what
// promtool accepts, carry the labels documented, and follow the pinglist:
// a peer that leaves it leaves no series behind, a probe from or to a peer
// not on it makes none.
func TestScrape(t *testing.T) {
	s := New(Local{Host: "n1", Dev: "mlx5_0"}, ClockCQE)
	if err := s.SetPeers(peersOf("n2:9100", "n3:9100", "n4:9100")); err != nil {
		t.Fatal(err)
	}
	s.SetBudget(500)
	when := time.Unix(1_800_000_000, 0)
	for _, p := range []string{"n2:9100", "n3:9100", "n4:9100"} {
		s.Sent(p)
		s.Answered(p, 30*time.Microsecond, 5*time.Microsecond, false, when)
	}
	s.Sent("n4:9100")
	s.Lost("n4:9100")
	s.SetReachable("n4:9100", false)
	s.Sent("n2:9100")
	s.Answered("n2:9100", 80*time.Millisecond, 5*time.Microsecond, true, when) // late
	if s.Sent("stranger:1") || s.Answered("stranger:1", time.Millisecond, 0, true, when) || s.Lost("stranger:1") || s.SetReachable("stranger:1", false) {
		t.Error("a peer not on the list was counted")
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	text, fams := promtest.Scrape(t, srv.URL)
	if complaints := promtest.Promtool(t, text); complaints != "" {
		t.Errorf("promtool check metrics:\n%s\n%s", complaints, text)
	}
	for _, name := range Names() {
		if fams[name] == nil {
			t.Errorf("%s not exported", name)
		}
	}
	if got := byPeer(fams, RTT); got["n2:9100"] != 2 || len(got) != 3 { // a series per part
		t.Errorf("RTT series by peer: %v", got)
	}
	for _, m := range fams[RTT].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		want := map[string]string{LabelLocalHost: "n1", LabelLocalDev: "mlx5_0", LabelClock: "cqe"}
		for k, v := range want {
			if labels[k] != v {
				t.Errorf("RTT series %v: %s=%q, want %q", labels, k, labels[k], v)
			}
		}
		h := m.GetHistogram()
		switch labels[LabelPart] {
		case "network": // 30 - 5 µs, in the bucket above 22.6 µs (n2: and its late 80 ms)
			sum := h.GetSampleSum()
			if labels[LabelPeer] == "n2:9100" {
				sum -= 80e-3 - 5e-6
			}
			if wantN := map[bool]uint64{true: 2, false: 1}[labels[LabelPeer] == "n2:9100"]; h.GetSampleCount() != wantN || sum < 24e-6 || sum > 26e-6 {
				t.Errorf("network part: %d samples, sum %g", h.GetSampleCount(), h.GetSampleSum())
			}
		case "host":
			sum := h.GetSampleSum()
			if labels[LabelPeer] == "n2:9100" {
				sum -= 5e-6
			}
			if sum < 4e-6 || sum > 6e-6 {
				t.Errorf("host part: sum %g", h.GetSampleSum())
			}
		default:
			t.Errorf("part %q", labels[LabelPart])
		}
	}
	for _, c := range []struct {
		name string
		want map[string]float64
	}{
		{ProbesLost, map[string]float64{"n2:9100": 0, "n3:9100": 0, "n4:9100": 1}},
		{ProbesLate, map[string]float64{"n2:9100": 1, "n3:9100": 0, "n4:9100": 0}},
	} {
		for _, m := range fams[c.name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == LabelPeer && m.GetCounter().GetValue() != c.want[l.GetValue()] {
					t.Errorf("%s of %s: %v, want %v", c.name, l.GetValue(), m.GetCounter().GetValue(), c.want[l.GetValue()])
				}
			}
		}
	}
	for _, m := range fams[PeerReachable].GetMetric() {
		peer := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == LabelPeer {
				peer = l.GetValue()
			}
		}
		if want := map[bool]float64{true: 0, false: 1}[peer == "n4:9100"]; m.GetGauge().GetValue() != want {
			t.Errorf("%s reachable %v, want %v", peer, m.GetGauge().GetValue(), want)
		}
	}

	// n3 leaves, n5 joins: n3's series go, n2's counters stay.
	if err := s.SetPeers(peersOf("n2:9100", "n5:9100", "n4:9100")); err != nil {
		t.Fatal(err)
	}
	_, fams = promtest.Scrape(t, srv.URL)
	for _, name := range []string{RTT, ProbesSent, ProbesLost, ProbesLate, PeerReachable, LastSuccess} {
		got := byPeer(fams, name)
		if got["n3:9100"] != 0 || got["n5:9100"] == 0 || got["n2:9100"] == 0 || len(got) != 3 {
			t.Errorf("%s by peer after the list changed: %v", name, got)
		}
	}
	for _, m := range fams[ProbesSent].GetMetric() {
		if strings.Contains(m.String(), `"n2:9100"`) && m.GetCounter().GetValue() != 2 {
			t.Errorf("n2's probes sent %v after the list changed, want 2 kept", m.GetCounter().GetValue())
		}
	}
}

// However many peers come and go, the series are those of the last list.
func TestSeriesBounded(t *testing.T) {
	s := New(Local{Host: "n0"}, ClockCPU)
	for round := range 200 {
		var addrs []string
		for i := range 40 {
			addrs = append(addrs, "h"+string(rune('a'+round%26))+string(rune('a'+i%26))+":"+string(rune('1'+i/26)))
		}
		if err := s.SetPeers(peersOf(addrs...)); err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			s.Answered(a, time.Millisecond, time.Microsecond, false, time.Now())
		}
	}
	fams, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if n := len(f.GetMetric()); f.GetName() == RTT && n != 80 || (f.GetName() == ProbesSent || f.GetName() == ProbesLate) && n != 40 {
			t.Errorf("%s: %d series after 200 lists of 40 peers", f.GetName(), n)
		}
	}
	if err := s.SetPeers(make([]Peer, MaxPeers+1)); err == nil {
		t.Error("a list over MaxPeers taken")
	}
	if err := s.SetPeers(peersOf("a:1", "a:1")); err == nil || err.Error() != "peer a:1 twice" {
		t.Errorf("a peer twice: %v", err)
	}
}

// A hold time the peer reports outside [0, rtt] cannot make the network
// part negative or larger than the round trip.
func TestHoldClamped(t *testing.T) {
	s := New(Local{Host: "n0"}, ClockCPU)
	s.SetPeers(peersOf("n1:1"))
	s.Answered("n1:1", 10*time.Microsecond, time.Hour, false, time.Now())
	s.Answered("n1:1", 10*time.Microsecond, -time.Hour, false, time.Now())
	fams, _ := s.Registry().Gather()
	for _, f := range fams {
		if f.GetName() != RTT {
			continue
		}
		for _, m := range f.GetMetric() {
			if sum := m.GetHistogram().GetSampleSum(); sum < 0 || sum > 20e-6+1e-12 {
				t.Errorf("%v: sum %g outside [0, 2 rtt]", m.GetLabel(), sum)
			}
		}
	}
}
