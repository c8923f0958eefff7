package main

// The agent on one rxe device: three agents probing each other over their
// UD QPs, scraped over HTTP as Prometheus would, with an agent killed and
// restarted (a new QP: its peers fetch its address again), the peers file
// edited and SIGHUP. The two-node suite runs agents on both guests with a
// real Prometheus and its rules (TestTwoNodeAgent).

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/rdmabench/rdmabench/agent/exchange"
	"github.com/rdmabench/rdmabench/agent/metrics"
	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/agent/wire"
	"github.com/rdmabench/rdmabench/internal/promtest"
	"github.com/rdmabench/rdmabench/internal/syncbuf"
)

// localAgent is `rdmabench agent` run from this test binary.
type localAgent struct {
	addr string
	cmd  *exec.Cmd
	log  *syncbuf.Buffer
	done chan struct{} // closed when it has exited, with err
	err  error
}

func startLocalAgent(t testing.TB, addr string, args ...string) *localAgent {
	t.Helper()
	a := &localAgent{addr: addr, log: &syncbuf.Buffer{}, done: make(chan struct{})}
	a.cmd = exec.Command(os.Args[0], append([]string{"agent", "--listen", addr}, args...)...)
	a.cmd.Env = append(os.Environ(), "RDMABENCH_RUN_MAIN=1")
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.err = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			// Its metrics, then a SIGTERM for its closing counts.
			if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Logf("agent %s's metrics:\n%s", addr, grepLines(string(b), "rdmabench_agent_(datagrams|probes|peer_reachable|rtt_seconds_count)"))
			}
			a.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-a.done:
			case <-time.After(5 * time.Second):
			}
			t.Logf("agent %s's log:\n%s", addr, lastLines(a.log.String(), 60))
		}
		a.cmd.Process.Kill()
		<-a.done
	})
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return a
		}
	}
	t.Fatalf("agent %s does not listen after 15 s:\n%s", addr, a.log.String())
	return nil
}

// grepLines is the lines of s that match re.
func grepLines(s, re string) string {
	r := regexp.MustCompile(re)
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if r.MatchString(l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// agentSeries is one scrape: each family's samples by their peer label.
type agentSeries map[string]map[string]*dto.Metric

func scrapeAgent(t *testing.T, addr string) agentSeries {
	t.Helper()
	_, fams := promtest.Scrape(t, "http://"+addr)
	out := agentSeries{}
	for name, f := range fams {
		out[name] = map[string]*dto.Metric{}
		for _, m := range f.Metric {
			key := ""
			for _, l := range m.Label {
				switch l.GetName() {
				case metrics.LabelPeer:
					key = l.GetValue() + key
				case metrics.LabelPart:
					key += "/" + l.GetValue()
				}
			}
			out[name][key] = m
		}
	}
	return out
}

func (s agentSeries) counter(name, peer string) float64 {
	if m := s[name][peer]; m != nil {
		return m.GetCounter().GetValue()
	}
	return -1
}

func (s agentSeries) gauge(name, peer string) float64 {
	if m := s[name][peer]; m != nil {
		return m.GetGauge().GetValue()
	}
	return -1
}

func (s agentSeries) rtt(peer, part string) (count uint64, sum float64) {
	if m := s[metrics.RTT][peer+"/"+part]; m != nil {
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	return 0, 0
}

// waitAgents polls the agents' scrapes until ok holds for every one, or
// fails the test after d with the last reason.
func waitAgents(t *testing.T, d time.Duration, what string, agents []string, ok func(self string, s agentSeries) string) time.Duration {
	t.Helper()
	start := time.Now()
	why := ""
	for time.Since(start) < d {
		why = ""
		for _, a := range agents {
			if w := ok(a, scrapeAgent(t, a)); w != "" {
				why = a + ": " + w
				break
			}
		}
		if why == "" {
			return time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v: %s", what, d, why)
	return 0
}

func TestE2EAgent(t *testing.T) {
	needRDMA(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("agent-test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := 19100 + os.Getpid()%400*3
	addrs := []string{}
	for i := range 3 {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(base+i))
	}
	peers := filepath.Join(dir, "peers")
	writePeers := func(list []string) {
		tmp := peers + ".new"
		if err := os.WriteFile(tmp, []byte("# the agents of TestE2EAgent\n"+strings.Join(list, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, peers); err != nil { // as a config manager swaps a file in
			t.Fatal(err)
		}
	}
	writePeers(addrs)
	const rate = 20
	args := []string{"--peers", peers, "--token-file", token, "--host", "127.0.0.1", "--rate", strconv.Itoa(rate)}
	agents := make([]*localAgent, 3)
	for i, a := range addrs {
		agents[i] = startLocalAgent(t, a, args...)
	}
	others := func(self string) []string {
		var o []string
		for _, a := range addrs {
			if a != self {
				o = append(o, a)
			}
		}
		return o
	}
	healthy := func(min uint64) func(string, agentSeries) string {
		return func(self string, s agentSeries) string {
			for _, p := range others(self) {
				n, sum := s.rtt(p, "network")
				h, hsum := s.rtt(p, "host")
				sent, lost := s.counter(metrics.ProbesSent, p), s.counter(metrics.ProbesLost, p)
				switch {
				case n < min || h != n:
					return fmt.Sprintf("%d network and %d host samples to %s, want %d or more of each", n, h, p, min)
				case s.gauge(metrics.PeerReachable, p) != 1:
					return p + " not reachable"
				case lost > 0.05*sent:
					return fmt.Sprintf("%g of %g probes to %s lost", lost, sent, p)
				case sum <= 0 || hsum < 0:
					return fmt.Sprintf("RTT sums to %s: network %g s, host %g s", p, sum, hsum)
				}
			}
			if _, self := s[metrics.ProbesSent][self]; self {
				return "it probes itself"
			}
			return ""
		}
	}
	// rxe has no completion timestamps: the agent asked for them
	// (ibv_create_cq_ex), was refused, and says it times on the CPU.
	if l := agents[0].log.String(); !strings.Contains(l, "no completion timestamps on rxe0 (ibv_create_cq_ex") || !strings.Contains(l, "timing on the CPU's clock") {
		t.Errorf("agent 1 does not say which clock it times with:\n%s", l)
	}
	took := waitAgents(t, 30*time.Second, "every pair answered 20 probes", addrs, healthy(20))
	t.Logf("every pair answered 20 probes within %v", took.Round(time.Millisecond))
	s := scrapeAgent(t, addrs[0])
	for _, p := range others(addrs[0]) {
		n, sum := s.rtt(p, "network")
		_, hsum := s.rtt(p, "host")
		t.Logf("%s → %s: %d replies, mean network RTT %.1f µs, mean hold %.1f µs, %g of %g lost", addrs[0], p, n,
			1e6*sum/float64(n), 1e6*hsum/float64(n), s.counter(metrics.ProbesLost, p), s.counter(metrics.ProbesSent, p))
	}

	// The address record: refused without the token, served with it.
	resp, err := http.Get("http://" + addrs[1] + wire.AddressPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an address request without the token: %s, want 401", resp.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	rec, err := exchange.Fetch(ctx, http.DefaultClient, addrs[1], []byte("agent-test-token"))
	cancel()
	if err != nil || rec.QPN < 2 || rec.Clock != wire.ClockCPU || rec.Host != "127.0.0.1" {
		t.Fatalf("the address record with the token: %+v, %v", rec, err)
	}

	// Agent 3 killed: the others lose it within its run of losses (at the
	// rate, plus the timeout) and a scrape or two; a generous bound for a
	// TCG guest.
	reach := rules.DefaultReach
	bound := time.Duration(float64(reach.LostInARow)/rate*float64(time.Second)) + reach.Timeout + 5*time.Second
	agents[2].cmd.Process.Kill()
	<-agents[2].done
	took = waitAgents(t, bound, "agent 3 unreachable after its kill", addrs[:2], func(self string, s agentSeries) string {
		if v := s.gauge(metrics.PeerReachable, addrs[2]); v != 0 {
			return fmt.Sprintf("reachable %g", v)
		}
		return ""
	})
	t.Logf("agent 3 killed: unreachable from both others within %v (bound %v)", took.Round(time.Millisecond), bound)

	// Restarted on its port with a new QP: the others fetch its address
	// again (a backoff up to 16 s while it was down) and reach it.
	agents[2] = startLocalAgent(t, addrs[2], args...)
	took = waitAgents(t, 40*time.Second, "agent 3 reachable again after its restart", addrs, func(self string, s agentSeries) string {
		for _, p := range others(self) {
			if v := s.gauge(metrics.PeerReachable, p); v != 1 {
				return fmt.Sprintf("%s reachable %g", p, v)
			}
		}
		return ""
	})
	t.Logf("agent 3 restarted: reached by and reaching both others within %v", took.Round(time.Millisecond))

	// The peers file without agent 2: read again within its check period,
	// and agent 2's series are gone from agent 1 (no series grow without
	// bound as peers come and go).
	writePeers([]string{addrs[0], addrs[2]})
	waitAgents(t, 10*time.Second, "agent 2's series gone after the peers file dropped it", addrs[:1], func(self string, s agentSeries) string {
		if _, ok := s[metrics.ProbesSent][addrs[1]]; ok {
			return "still has agent 2's series"
		}
		if s.counter(metrics.ProbesSent, addrs[2]) <= 0 {
			return "lost agent 3's series too"
		}
		return ""
	})
	// SIGHUP reads it again at once.
	writePeers(addrs)
	agents[0].cmd.Process.Signal(syscall.SIGHUP)
	waitAgents(t, 10*time.Second, "agent 2 probed again after the file was restored and SIGHUP", addrs[:1], func(self string, s agentSeries) string {
		if s.counter(metrics.ProbesSent, addrs[1]) <= 0 {
			return "no series for agent 2"
		}
		return ""
	})
	if !strings.Contains(agents[0].log.String(), "SIGHUP: probing 2 peers") {
		t.Errorf("agent 1 logged no SIGHUP reload:\n%s", agents[0].log.String())
	}
	cpu := scrapeAgent(t, addrs[0])[metrics.CPUSeconds][""].GetCounter().GetValue()
	t.Logf("agent 1 used %.2f s of CPU", cpu)

	// SIGTERM: a clean stop, exit 0, with its counts.
	agents[0].cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-agents[0].done:
		if agents[0].err != nil || !strings.Contains(agents[0].log.String(), "stopped after") {
			t.Errorf("SIGTERM: %v; log:\n%s", agents[0].err, agents[0].log.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("agent 1 still runs 10 s after SIGTERM")
	}
}
