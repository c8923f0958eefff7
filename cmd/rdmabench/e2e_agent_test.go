package main

// TestTwoNodeAgent is issue 39's two-node test of the agent with a real
// Prometheus: agentsPerNode agents on each guest (distinct ports on
// 198.18.0.1 and 198.18.0.2, the same rxe0), Debian's prometheus on node 1
// scraping them all every period with contrib/prometheus's rules, a
// healthy phase that must fire nothing, then four faults in turn, each
// with the alert it must fire within a time the rules state and none that
// it must not, and a recovery before the next. Everything is asked of
// Prometheus's HTTP API: what the alerts and the series were, not what
// the agents say of themselves.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/agent/sim"
	"github.com/rdmabench/rdmabench/internal/promtest"
)

// agentsPerNode is two: each agent then has three ToR-mesh probers, RNICDown's
// MinProbers, and one of them on its own node, so that a node-2 agent whose
// device is gone is still probed by three (two on node 1, one beside it) and
// one killed is lost by three, as a dead RNIC would be. Three a node (five
// probers each) were tried until 2026-12-06: on two TCG guests sharing two
// host cores node 1 was then 99% busy (Prometheus 55% of a CPU, each agent
// 36%, each node 2 agent 39-40%), 26% of the healthy probes came late, and
// a node 1 agent now and then went unscraped for 3 s, which AgentDown
// rightly reads as down (in two of the six runs that day).
const agentsPerNode = 2

// startPrometheus writes the scrape config (job rules.AgentJob, every
// target an agent's --listen as the peers file has it, so that instance
// is the peer label its probers use) and starts the server (its TSDB in
// node 1's own tmpfs: the host root is read-only).
func startPrometheus(t testing.TB, targets []string) *promtest.Server {
	t.Helper()
	ruleFile, err := filepath.Abs("../../contrib/prometheus/rdmabench-agent.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ruleFile); err != nil {
		t.Fatalf("the rule file: %v", err)
	}
	period := rules.Default().Period
	quoted := make([]string, len(targets))
	for i, a := range targets {
		quoted[i] = "'" + a + "'"
	}
	// The scrape timeout is the period: a scrape may not outlast its
	// interval, and a scrape cut off by a link that went down then fails
	// within one period.
	cfg := fmt.Sprintf(`# TestTwoNodeAgent's Prometheus (cmd/rdmabench/e2e_agent_test.go)
global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
rule_files:
  - %[2]s
scrape_configs:
  - job_name: %[3]s
    static_configs:
      - targets: [%[4]s]
`, promtest.Duration(period), ruleFile, rules.AgentJob, strings.Join(quoted, ", "))
	// Its start (TSDB, rules, web) on a TCG guest takes a few seconds.
	return promtest.StartPrometheus(t, cfg, 90*time.Second)
}

// labelsOf is a series' labels without its name, sorted, for messages.
func labelsOf(m map[string]string) string {
	var ls []string
	for k, v := range m {
		if k != "__name__" && k != "alertstate" && k != "severity" {
			ls = append(ls, k+"="+v)
		}
	}
	slices.Sort(ls)
	return "{" + strings.Join(ls, ", ") + "}"
}

// node2Agent is a process on node 2 (an agent, or the trigger server):
// this test binary run by rxe-node, its output in /tmp/rxe-node/PID.log
// there.
type node2Agent struct {
	addr, pid string
}

func startNode2Agent(t testing.TB, addr string, args []string) *node2Agent {
	t.Helper()
	return startOnNode2(t, "the agent", addr, append([]string{"env", "RDMABENCH_RUN_MAIN=1", os.Args[0], "agent", "--listen", addr}, args...)...)
}

// startOnNode2 starts argv in the background on node 2, what listening on
// addr, and waits (30 s at most) until it does; a cleanup kills it, after
// logging its output if the test failed.
func startOnNode2(t testing.TB, what, addr string, argv ...string) *node2Agent {
	t.Helper()
	out, code := onNode2(t, append([]string{"--bg"}, argv...)...)
	a := &node2Agent{addr: addr, pid: strings.TrimSpace(out)}
	if code != 0 || a.pid == "" {
		t.Fatalf("starting %s %s on node 2: exit %d: %s", what, addr, code, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s %s's log (node 2, pid %s; last 60 lines):\n%s", what, addr, a.pid, lastLines(a.log(t), 60))
		}
		onNode2(t, "kill", "-9", a.pid)
	})
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return a
		}
	}
	t.Fatalf("%s %s on node 2 does not listen after 30 s:\n%s\nthe link: %s", what, addr, a.log(t), linkState(t))
	return nil
}

func (a *node2Agent) log(t testing.TB) string {
	out, _ := onNode2(t, "cat", "/tmp/rxe-node/"+a.pid+".log")
	return out
}

// agentFabric is the agents of both nodes and their Prometheus.
type agentFabric struct {
	t            *digestT
	prom         *promtest.Server
	scrapeErrs   *scrapeErrors
	node1, node2 []string // the agents' addresses, as the peers file has them
	args         []string // node 2's agents' flags (for a restart)
	remote       []*node2Agent
	pairs        int // directed pairs: each agent probes every other
}

// settled is "" when the fabric is back to health as Prometheus sees it:
// every agent scraped, every pair reachable, no alert firing; else why.
func (f *agentFabric) settled() string {
	p := f.prom
	n := len(f.node1) + len(f.node2)
	up := p.Count(fmt.Sprintf(`up{job=%q} == 1`, rules.AgentJob))
	reach := p.Count(fmt.Sprintf(`rdmabench_agent_peer_reachable{job=%q} == 1`, rules.AgentJob))
	firing := p.MustQuery(`ALERTS{alertstate="firing"}`)
	switch {
	case up != n:
		return fmt.Sprintf("%d of %d agents scraped", up, n)
	case reach != f.pairs:
		return fmt.Sprintf("%d of %d pairs reachable", reach, f.pairs)
	case len(firing) > 0:
		var names []string
		for _, s := range firing {
			names = append(names, s.Metric["alertname"]+labelsOf(s.Metric))
		}
		return "firing: " + strings.Join(names, "; ")
	}
	return ""
}

// waitSettled waits (bounded) until settled and extra (if any) hold; it
// returns "" or the last reason.
func (f *agentFabric) waitSettled(d time.Duration, extra func() string) (string, time.Duration) {
	start := time.Now()
	why := ""
	for time.Since(start) < d {
		if why = f.settled(); why == "" && extra != nil {
			why = extra()
		}
		if why == "" {
			return "", time.Since(start)
		}
		time.Sleep(time.Second)
	}
	return why, time.Since(start)
}

// faultRow is one line of the closing table.
type faultRow struct {
	fault, alert string
	first, last  float64 // seconds from the fault to the first and the last expected alert firing
	fired, want  int
	limit        time.Duration
}

func (r faultRow) String() string {
	secs := "did not fire"
	if r.fired > 0 {
		secs = fmt.Sprintf("%.1f", r.first)
		if r.want > 1 {
			secs += fmt.Sprintf(" (%d of %d, the last at %.1f)", r.fired, r.want, r.last)
		}
	}
	return fmt.Sprintf("%s | %s | %s | %.0f", r.fault, r.alert, secs, r.limit.Seconds())
}

// fault is one fault and what it must fire.
type fault struct {
	name  string
	alert rules.Alert
	// want are the expected alert's series by key(labels): the agents
	// (AgentDown: instance; RNICDown: peer) or pairs (PathLoss) it names.
	want  []string
	key   func(map[string]string) string
	limit time.Duration
	// shows is a query that must have showsN series at some time while
	// the fault is on: the fault as the scraped series carry it.
	shows  string
	showsN int
	// inject sets the fault off and says when, on node 1's clock.
	inject func() time.Time
	// recover ends the fault; the fabric must then settle within
	// recoverIn.
	recover   func()
	recoverIn time.Duration
}

// run injects the fault, polls Prometheus until the alert fires for every
// expected series or the limit passes, recovers, waits for the fabric to
// settle, and then reads from Prometheus's own record (the ALERTS series
// over the fault's whole span) when each expected alert first fired and
// whether any other alert fired at all.
func (f *agentFabric) run(c fault) faultRow {
	t, p := f.t, f.prom
	row := faultRow{fault: c.name, alert: c.alert.String(), want: len(c.want), limit: c.limit}
	missed := f.mark()
	t0 := c.inject()
	seen := map[string]bool{}
	shown := false
	for time.Since(t0) < c.limit+2*time.Second && (len(seen) < len(c.want) || !shown) {
		for _, s := range p.MustQuery(fmt.Sprintf(`ALERTS{alertstate="firing", alertname=%q}`, c.alert.String())) {
			if k := c.key(s.Metric); slices.Contains(c.want, k) {
				seen[k] = true
			}
		}
		if !shown && p.Count(c.shows) == c.showsN {
			shown = true
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !shown {
		t.Errorf("%s: the scraped series never showed it: %s has not %d series (now %d) within %v", c.name, c.shows, c.showsN, p.Count(c.shows), c.limit)
	}
	c.recover()
	why, took := f.waitSettled(c.recoverIn, nil)
	if why != "" {
		t.Errorf("%s: not recovered %v after the fault ended: %s", c.name, took.Round(time.Second), why)
	}
	span := time.Since(t0)
	first := map[string]float64{}
	start := float64(t0.UnixNano()) / 1e9
	for _, s := range p.MustQuery(`ALERTS{alertstate="firing"}[` + promtest.Duration(span+time.Second) + `]`) {
		at := math.Inf(1)
		for _, v := range s.Values {
			if ts, _ := promtest.Sample(v); ts >= start {
				at = min(at, ts-start)
			}
		}
		if math.IsInf(at, 1) {
			continue // before this fault
		}
		name := s.Metric["alertname"]
		if k := c.key(s.Metric); name == c.alert.String() && slices.Contains(c.want, k) {
			first[k] = at
			continue
		}
		t.Errorf("%s: a wrong alert fired %.1f s after the fault: %s%s", c.name, at, name, labelsOf(s.Metric))
	}
	row.first, row.fired = math.Inf(1), len(first)
	for _, k := range c.want {
		at, ok := first[k]
		switch {
		case !ok:
			t.Errorf("%s: %s did not fire for %s within %v", c.name, c.alert, k, c.limit)
		case at > c.limit.Seconds():
			t.Errorf("%s: %s fired for %s %.1f s after the fault, past the limit of %v", c.name, c.alert, k, at, c.limit)
		}
		if ok {
			row.first, row.last = min(row.first, at), max(row.last, at)
		}
	}
	t.Logf("fault %s: %s fired for %d of %d within %.1f-%.1f s (limit %v); recovered in %v; %s", c.name, c.alert, row.fired, row.want, row.first, row.last, c.limit, took.Round(time.Second), f.timing(t0, span, missed))
	return row
}

func TestTwoNodeAgent(tt *testing.T) {
	t := withDigest(tt)
	needTwoNodes(t)
	if _, err := os.Stat(promtest.PrometheusBin); err != nil {
		skipOrFail(t, "%s missing: Debian's prometheus package (ci/deps.sh installs it with promtool): %v", promtest.PrometheusBin, err)
	}
	ensureLink(t)
	netdev := linkNetdev()
	// Both nodes' link gets its netem qdisc now, at no loss, and the loss
	// fault only changes it: putting a qdisc in place (tc qdisc replace)
	// moved two of node 1's agents' UD QPs to error on rxe (their receives
	// flushed 3.8 s into the fault; they reopened, and RNICDown fired for
	// the 2 s they reached nobody), a fault of the emulated NIC, not the
	// 5% loss the test injects.
	netemNode1 := func(tc []string) error {
		if out, err := exec.Command(tc[0], tc[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%v on node 1: %v: %s", tc, err, out)
		}
		return nil
	}
	netem := func(args ...string) error {
		tc := append([]string{"tc", "qdisc"}, args...)
		if out, code := onNode2(t, tc...); code != 0 {
			return fmt.Errorf("%v on node 2: %s", tc, out)
		}
		return netemNode1(tc)
	}
	if err := netem("replace", "dev", netdev, "root", "netem", "loss", "0%"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netem("del", "dev", netdev, "root") })
	// A reset of a NIC (ensureLink, after an emulator stall) makes its
	// netdev anew, without the qdisc: put it back, on that node only.
	ensureNetem := func() {
		show := []string{"tc", "qdisc", "show", "dev", netdev, "root"}
		add := []string{"tc", "qdisc", "replace", "dev", netdev, "root", "netem", "loss", "0%"}
		if out, _ := onNode2(t, show...); !strings.Contains(out, "netem") {
			t.Logf("node 2's link lost its netem qdisc (a NIC reset): adding it again")
			if out, code := onNode2(t, add...); code != 0 {
				t.Fatalf("%v on node 2: %s", add, out)
			}
		}
		if out, _ := exec.Command(show[0], show[1:]...).CombinedOutput(); !strings.Contains(string(out), "netem") {
			t.Logf("node 1's link lost its netem qdisc (a NIC reset): adding it again")
			if out, err := exec.Command(add[0], add[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%v on node 1: %v: %s", add, err, out)
			}
		}
	}
	r, reach := rules.Default(), rules.DefaultReach
	healthy := healthyPhase(t, r)
	const rate = 10 // probes a second to each peer: the agent's default, and the simulation's
	// margin is what each time limit gets on top of the rules' own worst
	// case: the guests are TCG-emulated, two vCPUs each on two shared host
	// cores, and a guest waiting for a core holds its agents' probes,
	// Prometheus's scrapes and its rule evaluations alike. Ten periods:
	// many times the rules' own spread, still far below what would let a
	// slow fault pass for a fast one (the closing table has the figures).
	margin := 10 * r.Period
	dev := os.Getenv("RXE_DEVICE")
	if dev == "" {
		dev = "rxe0"
	}

	// agentsPerNode agents a node, on ports of their own.
	base := 30000 + os.Getpid()%1000*4
	f := &agentFabric{t: t}
	for i := range agentsPerNode {
		f.node1 = append(f.node1, net.JoinHostPort(node1Addr, strconv.Itoa(base+i)))
		f.node2 = append(f.node2, net.JoinHostPort(node2Addr, strconv.Itoa(base+i)))
	}
	all := append(append([]string{}, f.node1...), f.node2...)
	f.pairs = len(all) * (len(all) - 1)
	peers := fmt.Sprintf("# TestTwoNodeAgent's agents: %d on each node\n", agentsPerNode) + strings.Join(all, "\n") + "\n"
	tok := make([]byte, 16)
	rand.Read(tok)
	token := hex.EncodeToString(tok)
	// The files on each node's own /tmp: node 1's test tmpfs is not
	// node 2's.
	dir1 := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir1, "peers"), []byte(peers), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir1, "token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir2 := fmt.Sprintf("/tmp/rdmabench-agent-test-%d", os.Getpid())
	if out, code := onNode2(t, "bash", "-c", `mkdir -p "$1" && printf '%s' "$2" >"$1/peers" && umask 077 && printf '%s\n' "$3" >"$1/token"`, "_", dir2, peers, token); code != 0 {
		t.Fatalf("writing the peers and token files on node 2: %s", out)
	}
	t.Cleanup(func() { onNode2(t, "rm", "-rf", dir2) })
	flags := func(dir, host string) []string {
		return []string{"--peers", filepath.Join(dir, "peers"), "--token-file", filepath.Join(dir, "token"), "--host", host,
			"-d", dev, "--rate", strconv.Itoa(rate)}
	}
	for _, a := range f.node1 {
		startLocalAgent(t, a, flags(dir1, node1Addr)...)
	}
	f.args = flags(dir2, node2Addr)
	for _, a := range f.node2 {
		f.remote = append(f.remote, startNode2Agent(t, a, f.args))
	}
	// The faults' commands on node 2 go over the link (e2e_trigger_test.go).
	trigger := startTrigger(t, net.JoinHostPort(node2Addr, strconv.Itoa(base+3)))
	f.prom = startPrometheus(t, all)
	f.scrapeErrs = sampleScrapeErrors(t, f.prom)
	p := f.prom
	// On a failure: both nodes' evidence (kernels, link, rxe counters)
	// while the agents still run, and every alert Prometheus recorded.
	testStart := time.Now()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		evidence(t)
		if s, err := p.Query(`ALERTS[` + promtest.Duration(time.Since(testStart)) + `]`); err == nil {
			for _, a := range s {
				first, _ := promtest.Sample(a.Values[0])
				last, _ := promtest.Sample(a.Values[len(a.Values)-1])
				t.Logf("ALERTS %s%s from %.0f s to %.0f s of the test", a.Metric["alertname"], labelsOf(a.Metric),
					first-float64(testStart.UnixNano())/1e9, last-float64(testStart.UnixNano())/1e9)
			}
		}
	})
	tableFile := os.Getenv("RDMABENCH_AGENT_TABLE")
	if tableFile == "" {
		tableFile = filepath.Join(t.TempDir(), "agent-faults.txt")
	}
	var table []string
	writeTable := func() {
		text := "fault | alert | seconds to fire | limit (s)\n" + strings.Join(table, "\n") + "\n"
		if err := os.WriteFile(tableFile, []byte(text), 0o644); err != nil {
			t.Errorf("the table: %v", err)
		}
	}

	// Every pair resolved and answering, as Prometheus scrapes it.
	why, took := f.waitSettled(2*time.Minute, nil)
	if why != "" {
		t.Fatalf("the %d agents did not all reach each other, as Prometheus sees them, within 2 minutes: %s", len(all), why)
	}
	t.Logf("%d agents and prometheus up, all %d pairs reachable in its series %v after it started", len(all), f.pairs, took.Round(time.Second))

	// The healthy phase: nothing fires, pending or not, and every pair
	// probes and answers.
	hMissed, hStart := f.mark(), time.Now()
	for next := time.Minute; time.Since(hStart) < healthy; {
		time.Sleep(min(10*time.Second, healthy-time.Since(hStart)))
		if s := p.MustQuery(`ALERTS{alertstate="firing"}`); len(s) > 0 {
			t.Fatalf("healthy phase, %v in: %s fired%s; %s", time.Since(hStart).Round(time.Second), s[0].Metric["alertname"], labelsOf(s[0].Metric), f.timing(hStart, time.Since(hStart), hMissed))
		}
		if time.Since(hStart) >= next {
			t.Logf("healthy phase: %v of %v, nothing fired", time.Since(hStart).Round(time.Second), healthy)
			next += time.Minute
		}
	}
	window := time.Since(hStart)
	w := promtest.Duration(window - time.Second) // within the phase
	if s := p.MustQuery(`ALERTS{alertstate="firing"}[` + w + `]`); len(s) > 0 {
		t.Errorf("healthy phase: %d alerts fired over its %v, the first %s%s", len(s), window.Round(time.Second), s[0].Metric["alertname"], labelsOf(s[0].Metric))
	}
	pending := p.MustQuery(`ALERTS{alertstate="pending"}[` + w + `]`)
	for _, s := range pending {
		t.Logf("healthy phase: %s%s was pending for %d evaluations (it did not fire)", s.Metric["alertname"], labelsOf(s.Metric), len(s.Values))
	}
	job := fmt.Sprintf(`{job=%q}`, rules.AgentJob)
	sent := p.MustQuery(`increase(rdmabench_agent_probes_sent_total` + job + `[` + w + `])`)
	lossQ := fmt.Sprintf(`sum by (instance, peer) (increase(rdmabench_agent_probes_lost_total%[1]s[%[2]s])) / sum by (instance, peer) (increase(rdmabench_agent_probes_sent_total%[1]s[%[2]s]))`, job, w)
	loss := p.MustQuery(lossQ)
	if len(sent) != f.pairs || len(loss) != f.pairs {
		t.Errorf("healthy phase: %d pairs' sent and %d pairs' loss series, want %d", len(sent), len(loss), f.pairs)
	}
	// A pair sends rate probes a second; on a guest that waited for a core
	// the agent does not burst to catch up, so at least half of them.
	leastSent, worstLoss := math.Inf(1), 0.0
	for _, s := range sent {
		_, v := promtest.Sample(s.Value)
		leastSent = min(leastSent, v)
		if v < 0.5*rate*window.Seconds() {
			t.Errorf("healthy phase: %s sent %.0f probes in %v, want at least half of %d a second", labelsOf(s.Metric), v, window.Round(time.Second), rate)
		}
	}
	// Lost ~0: a fifth of the path-loss bar at most, so that a healthy
	// pair is nowhere near a false PathLoss.
	for _, s := range loss {
		_, v := promtest.Sample(s.Value)
		worstLoss = max(worstLoss, v)
		if !(v <= r.PathLossRatio/5) {
			t.Errorf("healthy phase: %s lost %.3g of its probes, want at most %g", labelsOf(s.Metric), v, r.PathLossRatio/5)
		}
	}
	closest := func(expr string) float64 {
		s := p.MustQuery(expr)
		if len(s) == 0 {
			return math.NaN()
		}
		_, v := promtest.Sample(s[0].Value)
		return v
	}
	// The noise the simulation is to be run at (agent/sim.RXENoise): all
	// pairs' lost and late shares over the phase.
	total := func(family string) float64 {
		return closest(fmt.Sprintf(`sum(increase(%s%s[%s]))`, family, job, w))
	}
	allSent, allLost, allLate := total("rdmabench_agent_probes_sent_total"), total("rdmabench_agent_probes_lost_total"), total("rdmabench_agent_probes_late_total")
	t.Logf("healthy phase noise: %.0f probes, %.3g%% lost (no reply within %v), %.3g%% late (after %v)",
		allSent, 100*allLost/allSent, reach.LostAfter, 100*allLate/allSent, reach.Timeout)
	// The simulation's false alerts a day assume a loss of at most
	// sim.RXENoise().Loss: this phase's count must bound the real one
	// below it (95%), or the day's figures rest on nothing measured.
	if bound, assumed := lossUpperBound(allLost, allSent), sim.RXENoise().Loss; !(bound <= assumed) {
		t.Errorf("healthy phase: %.0f of %.0f probes lost bounds the loss at %.3g (95%%), above the %g the simulation assumes", allLost, allSent, bound, assumed)
	} else {
		t.Logf("healthy phase: the loss is below %.3g (95%%, %.0f lost of %.0f), within the %g the simulation assumes", bound, allLost, allSent, assumed)
	}
	lossClosest := closest(`max(max_over_time(` + r.RecPairLoss() + `[` + w + `]))`)
	holdClosest := closest(`max(max_over_time(` + r.RecPairHostP50() + `[` + w + `]))`)
	t.Logf("healthy phase: %v, no alert fired (%d pending); every pair sent at least %.0f probes, lost at most %.3g of them; the worst pair's 1m loss %.3g (PathLoss at %g), the worst median hold %.3g s (HostDelay above %g); %s",
		window.Round(time.Second), len(pending), leastSent, worstLoss, lossClosest, r.PathLossRatio, holdClosest, r.HostDelay.Seconds(), f.timing(hStart, window, hMissed))
	table = append(table, fmt.Sprintf("healthy, %v | none | %d fired, %d pending | -", window.Round(time.Second), 0, len(pending)))
	writeTable()

	peerKey := func(m map[string]string) string { return m["peer"] }
	instanceKey := func(m map[string]string) string { return m["instance"] }
	pairKey := func(m map[string]string) string { return m["instance"] + " > " + m["peer"] }
	// reachableFrom selects the reachable gauges of probers in from of
	// peers in to.
	alt := func(addrs []string) string {
		q := make([]string, len(addrs))
		for i, a := range addrs {
			q[i] = strings.ReplaceAll(a, ".", `\\.`)
		}
		return strings.Join(q, "|")
	}
	reachableFrom := func(from, to []string, v int) string {
		return fmt.Sprintf(`rdmabench_agent_peer_reachable{job=%q, instance=~"%s", peer=~"%s"} == %d`, rules.AgentJob, alt(from), alt(to), v)
	}
	runRow := func(c fault) {
		row := f.run(c)
		table = append(table, row.String())
		writeTable()
	}

	// 1. 5% loss on both nodes' link (netem drops what each sends): a
	// pair across the nodes loses 1-(1-5%)² = 9.75% of its round trips,
	// twice the PathLoss bar, while each end still reaches its others.
	// PathLoss for each pair across, both ways, none within a node. Its
	// 1m ratio crosses 5% about PathWindow·5%/9.75% = 31 s in, and by one
	// PathWindow it is the loss itself: the limit is that window, a
	// scrape and an evaluation. First, the rule's settle window must be
	// clean: it runs first, right after the healthy phase (longer than
	// that window), so that it does not wait out the window after the
	// faults that restart agents and QPs (two minutes of make test).
	settleWhy := func() string {
		c1 := p.Count(fmt.Sprintf(`max_over_time(%s[%s]) < %g`, rules.RecPeerUnreachedAll, promtest.Duration(r.SettleWindow), 1-r.OthersFraction))
		c2 := p.Count(fmt.Sprintf(`min_over_time(%s[%s]) >= %g`, rules.RecLocalReach, promtest.Duration(r.SettleWindow), r.OthersFraction))
		c3 := p.Count(fmt.Sprintf(`min_over_time(%s[%s]) == 0`, r.RecAgentUpHeld(), promtest.Duration(r.SettleWindow)))
		if c1 != len(all) || c2 != 2 || c3 != 0 {
			return fmt.Sprintf("the path-loss rule's %v window: %d of %d peers reached by half their probers throughout, %d of 2 hosts reaching half their peers, %d agents down in it",
				r.SettleWindow, c1, len(all), c2, c3)
		}
		return ""
	}
	if why, took := f.waitSettled(r.SettleWindow+time.Minute, settleWhy); why != "" {
		t.Fatalf("before the loss: not settled after %v: %s", took.Round(time.Second), why)
	}
	var cross []string
	for _, a := range f.node1 {
		for _, b := range f.node2 {
			cross = append(cross, a+" > "+b, b+" > "+a)
		}
	}
	runRow(fault{
		name: "5% loss on both nodes' link", alert: rules.PathLoss,
		want: cross, key: pairKey, limit: r.PathWindow + 2*r.Period + margin,
		shows: fmt.Sprintf(`%s{instance=~"%s", peer=~"%s"} >= %g`, r.RecPairLoss(), alt(f.node1), alt(f.node2), r.PathLossRatio), showsN: len(f.node1) * len(f.node2),
		inject: func() time.Time {
			// Node 2's first, over the link; node 1's own at once after.
			change := []string{"tc", "qdisc", "change", "dev", netdev, "root", "netem", "loss", "5%"}
			at := trigger.fire(t, true, change...)
			if err := netemNode1(change); err != nil {
				t.Fatal(err)
			}
			return at
		},
		recover: func() {
			if err := netem("change", "dev", netdev, "root", "netem", "loss", "0%"); err != nil {
				t.Fatal(err)
			}
		},
		// PathLoss resolves once the lossy minute has left its window.
		recoverIn: r.PathWindow + time.Minute,
	})

	// 2. Node 2's link down. On this target the link is node 2's only
	// network, so Prometheus loses its scrapes with its RNIC's traffic:
	// node 2 is a host cut off, which the rules must read as its
	// agents down (AgentDown), never as RNICs. (Where the scrape has a
	// network of its own a port down is the RNIC's: the rxe0 removal
	// below is that case.) The limit: a scrape starts within a period and
	// is cut off after its timeout, one more; then AgentDownFor and an
	// evaluation within a period.
	linkLimit := r.AgentDownFor + 3*r.Period + margin
	linkHold := int(math.Ceil((linkLimit + 2*time.Second).Seconds()))
	runRow(fault{
		name: fmt.Sprintf("link down on node 2 (%s, %d s)", netdev, linkHold), alert: rules.AgentDown,
		want: f.node2, key: instanceKey, limit: linkLimit,
		shows: reachableFrom(f.node1, f.node2, 0), showsN: len(f.node1) * len(f.node2),
		inject: func() time.Time {
			// On its own on node 2, so that the link comes back whatever
			// happens here; with the link down it cannot answer.
			return trigger.fire(t, false, "bash", "-c", fmt.Sprintf("ip link set %s down; sleep %d; ip link set %s up", netdev, linkHold, netdev))
		},
		recover: func() {
			for end := time.Now().Add(time.Duration(linkHold+30) * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
				if out, _ := onNode2(t, "cat", "/sys/class/net/"+netdev+"/operstate"); strings.TrimSpace(out) == "up" {
					break
				}
			}
			ensureLink(t)
			ensureNetem()
		},
		// The agents' probes find each other again at once, or after a
		// fetch of the address (a backoff up to 16 s while it failed).
		recoverIn: 90 * time.Second,
	})

	// 3. rxe0 removed on node 2: its agents lose their device (the
	// UD loop checks its presence every 500 ms and waits at most 200 ms,
	// agent/ud), every probe they send fails to leave and nothing
	// answers; they keep serving /metrics. RNICDown for them, not
	// AgentDown, and not node 1's agents, which still reach each other.
	// The limit: the device noticed, a run of LostInARow probes at the
	// rate and the timeout, a scrape and an evaluation.
	presence := 700 * time.Millisecond
	lossRun := time.Duration(float64(reach.LostInARow) / rate * float64(time.Second))
	rxeLimit := presence + lossRun + reach.Timeout + 2*r.Period + margin
	readd := func() {
		if out, code := onNode2(t, "bash", "-c", fmt.Sprintf(`[ -e /sys/class/infiniband/%[1]s ] || rdma link add %[1]s type rxe netdev %[2]s || exit 1
for i in $(seq 100); do grep -q ACTIVE /sys/class/infiniband/%[1]s/ports/1/state 2>/dev/null && exit 0; sleep 0.1; done; exit 1`, dev, netdev)); code != 0 {
			t.Fatalf("adding %s again on node 2: %s", dev, out)
		}
	}
	t.Cleanup(func() {
		onNode2(t, "bash", "-c", fmt.Sprintf("[ -e /sys/class/infiniband/%[1]s ] || rdma link add %[1]s type rxe netdev %[2]s", dev, netdev))
	})
	runRow(fault{
		name: fmt.Sprintf("%s removed on node 2", dev), alert: rules.RNICDown,
		want: f.node2, key: peerKey, limit: rxeLimit,
		shows: fmt.Sprintf(`%s{peer=~"%s"} == 0`, rules.RecAgentReach, alt(f.node2)), showsN: len(f.node2),
		inject: func() time.Time {
			return trigger.fire(t, true, "rdma", "link", "delete", dev)
		},
		recover: func() {
			readd()
			// The agents open the device again every 2 s on their own;
			// restarted only if they do not (an error: the daemon says
			// it does).
			if why, took := f.waitSettled(90*time.Second, nil); why != "" {
				t.Errorf("%s back on node 2: node 2's agents did not recover on their own within %v: %s; restarting them", dev, took.Round(time.Second), why)
				for i, a := range f.remote {
					onNode2(t, "kill", "-9", a.pid)
					f.remote[i] = startNode2Agent(t, a.addr, f.args)
				}
			}
		},
		recoverIn: 90 * time.Second,
	})

	// 4. One agent of node 2 killed: its probers lose it as they would a
	// dead RNIC, and only its own failed scrape says otherwise.
	// AgentDown for it, never RNICDown. The limit: its next scrape is
	// refused within a period, then AgentDownFor and an evaluation.
	victim := f.remote[0]
	runRow(fault{
		name: "an agent killed on node 2 (" + victim.addr + ")", alert: rules.AgentDown,
		want: []string{victim.addr}, key: instanceKey, limit: r.AgentDownFor + 2*r.Period + margin,
		shows: fmt.Sprintf(`rdmabench_agent_peer_reachable{job=%q, peer=%q} == 0`, rules.AgentJob, victim.addr), showsN: len(all) - 1,
		inject: func() time.Time {
			return trigger.fire(t, true, "kill", "-9", victim.pid)
		},
		recover: func() {
			// Restarted on its port with a new QP: its probers fetch its
			// address again within their backoff.
			f.remote[0] = startNode2Agent(t, victim.addr, f.args)
		},
		recoverIn: 90 * time.Second,
	})

	for _, l := range table {
		t.Logf("table: %s", l)
	}
	t.Logf("table written to %s; the test took %v", tableFile, time.Since(testStart).Round(time.Second))
}
