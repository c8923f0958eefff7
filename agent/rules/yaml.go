package rules

import (
	"fmt"
	"io"
	"strings"

	m "github.com/rdmabench/rdmabench/agent/metrics"
)

// The recorded series, by what they hold. Their names follow Prometheus's
// level:metric:operations.
const (
	// Per peer (and scope): the fraction of its probers that see it
	// unreachable, and how many probe it.
	RecPeerUnreached = "rdmabench_agent:peer_unreached:ratio"
	RecPeerProbers   = "rdmabench_agent:peer_probers:count"
	// Per peer, all scopes together.
	RecPeerUnreachedAll = "rdmabench_agent:peer_unreached_all:ratio"
	// Per prober: the fraction of its peers it reaches.
	RecLocalReach = "rdmabench_agent:local_reach:ratio"
	// Per agent, by its address as its probers' peer label: whether
	// Prometheus's last scrape of it (job AgentJob) succeeded, and the
	// fraction of its own peers it reaches (its own view).
	RecAgentUp    = "rdmabench_agent:agent_up"
	RecAgentReach = "rdmabench_agent:agent_reach:ratio"
)

// Per pair, over the rules' windows (named after them).
func (r Rules) RecPairLoss() string {
	return "rdmabench_agent:pair_loss:ratio_rate" + promDuration(r.PathWindow)
}
func (r Rules) RecPairHostP50() string {
	return "rdmabench_agent:pair_host_delay_seconds:p50_rate" + promDuration(r.HostWindow)
}
func (r Rules) RecPairNetP50() string {
	return "rdmabench_agent:pair_network_rtt_seconds:p50_rate" + promDuration(r.RegressionWindow)
}

// RecAgentUpHeld is an agent's up at its highest over AgentDownFor: 0 once
// its scrapes have failed that long (AgentDown's condition), where one
// failed scrape leaves it 1.
func (r Rules) RecAgentUpHeld() string {
	return RecAgentUp + ":max" + promDuration(r.AgentDownFor)
}
func (r Rules) RecPairNetBaseline() string {
	return "rdmabench_agent:pair_network_rtt_seconds:p50_baseline"
}

// RecordNames are every series the rules record.
func (r Rules) RecordNames() []string {
	return []string{RecPeerUnreached, RecPeerProbers, RecPeerUnreachedAll, RecLocalReach, RecAgentUp, RecAgentReach, r.RecAgentUpHeld(), r.RecPairLoss(), r.RecPairHostP50(), r.RecPairNetP50(), r.RecPairNetBaseline()}
}

type rule struct {
	record, alert string
	expr          string
	forDur        string
	severity      string
	summary       string
}

type group struct {
	name     string
	interval string
	rules    []rule
}

func (r Rules) groups() []group {
	peer := strings.Join([]string{m.LabelPeer, m.LabelPeerHost, m.LabelPeerToR}, ", ")
	local := m.LabelLocalHost + ", " + m.LabelLocalDev
	// An agent's scrape as its probers name it: the scrape's instance is
	// the agent's --listen, which is its peer label on their series.
	asPeer := func(expr string) string {
		return fmt.Sprintf("label_replace(%s, %q, \"$1\", \"instance\", \"(.*)\")", expr, m.LabelPeer)
	}
	job := fmt.Sprintf("{job=%q}", AgentJob)
	settle := promDuration(r.SettleWindow)
	// An agent's own view, from its own scrape: the share of its peers it
	// reaches, when it started, and its up at its lowest over the startup
	// window.
	agentReach := asPeer(fmt.Sprintf("avg by (instance) (%s%s)", m.PeerReachable, job))
	agentStart := asPeer(fmt.Sprintf("max by (instance) (%s%s)", m.StartTime, job))
	agentUpMin := asPeer(fmt.Sprintf("min_over_time(up%s[%s])", job, promDuration(r.StartupWindow)))
	fast := group{name: "rdmabench-agent", interval: promDuration(r.Period), rules: []rule{
		{record: RecPeerUnreached, expr: fmt.Sprintf("1 - avg by (%s, %s) (%s)", peer, m.LabelScope, m.PeerReachable)},
		{record: RecPeerProbers, expr: fmt.Sprintf("count by (%s, %s) (%s)", peer, m.LabelScope, m.PeerReachable)},
		{record: RecPeerUnreachedAll, expr: fmt.Sprintf("1 - avg by (%s) (%s)", peer, m.PeerReachable)},
		{record: RecLocalReach, expr: fmt.Sprintf("avg by (%s) (%s)", local, m.PeerReachable)},
		{record: RecAgentUp, expr: asPeer("up" + job)},
		// Averaged by instance first: an agent's series relabelled alone
		// would collide where two of its peers share a host.
		{record: RecAgentReach, expr: agentReach},
		{record: r.RecAgentUpHeld(), expr: fmt.Sprintf("max_over_time(%s[%s])", RecAgentUp, promDuration(r.AgentDownFor))},
		{record: r.RecPairLoss(), expr: fmt.Sprintf("rate(%s[%s]) / rate(%s[%s])", m.ProbesLost, promDuration(r.PathWindow), m.ProbesSent, promDuration(r.PathWindow))},
		{record: r.RecPairHostP50(), expr: fmt.Sprintf("histogram_quantile(0.5, rate(%s_bucket{%s=%q}[%s]))", m.RTT, m.LabelPart, PartHost, promDuration(r.HostWindow))},
		{alert: AgentDown.String(), severity: "warning", forDur: promDuration(r.AgentDownFor),
			expr:    RecAgentUp + " == 0",
			summary: "Prometheus cannot scrape the agent at {{ $labels.instance }}: the agent or its host is down; its peers losing it is not read as its RNIC"},
		// A killed agent and a dead RNIC look the same to every prober; only
		// the peer's own scrape tells them apart. Until its next scrape the
		// last one (from before the fault) shows it reaching its peers, and
		// a failed one sets up to 0 and marks its series stale in the same
		// commit. That view is read from the scraped series in this one
		// query, never from what this group recorded: each rule of a group
		// reads the storage as it is when that rule runs, and a scrape that
		// lands between two of them (on a slow host, most do) would leave
		// an agent's recorded up from before its failed scrape and its
		// recorded reach from after it, gone, which once fired RNICDown for
		// a host cut off (contrib/prometheus's midgroup_test.go makes it
		// happen). Its view counts once it has been scraped for a
		// StartupWindow without a failure (this evaluation's up is in the
		// range), and started before that (a restart between two scrapes
		// fails none): a host back on the network, or an agent that just
		// started, reaches nobody at its first scrapes, while its probers
		// still lose it.
		{alert: RNICDown.String(), severity: "critical",
			expr: fmt.Sprintf("%s{%s=\"tor\"} >= %s\nand on (%s) %s{%s=\"tor\"} >= %d\nunless on (%s) (%s > 0)\nunless on (%s) (%s == 0)\nunless on (%s) (time() - %s < %s)",
				RecPeerUnreached, m.LabelScope, num(r.RNICDownFraction), m.LabelPeer, RecPeerProbers, m.LabelScope, r.MinProbers,
				m.LabelPeer, agentReach, m.LabelPeer, agentUpMin, m.LabelPeer, agentStart, num(r.StartupWindow.Seconds())),
			summary: "{{ $labels.peer }} ({{ $labels.peer_host }} under {{ $labels.peer_tor }}) is unreachable from {{ $value | humanizePercentage }} of its ToR-mesh peers: its RNIC, port or cable"},
		// A peer whose agent is down is unreached by all its probers; the
		// windows keep its pairs out until its losses have left theirs. A
		// prober Prometheus could not scrape (its host cut off) left no
		// record of what it lost meanwhile, so its pairs wait too.
		{alert: PathLoss.String(), severity: "warning",
			expr: fmt.Sprintf("%s >= %s\nand on (%s) (min_over_time(%s[%s]) >= %s)\nand on (%s) (max_over_time(%s[%s]) < %s)\nunless on (instance) (min_over_time(%s[%s]) == 0)",
				r.RecPairLoss(), num(r.PathLossRatio), local, RecLocalReach, settle, num(r.OthersFraction),
				m.LabelPeer, RecPeerUnreachedAll, settle, num(1-r.OthersFraction), r.RecAgentUpHeld(), settle),
			summary: "{{ $labels.local_host }} {{ $labels.local_dev }} loses {{ $value | humanizePercentage }} of its probes to {{ $labels.peer }} while both reach their other peers: the path between them"},
		{alert: HostDelay.String(), severity: "warning",
			expr: fmt.Sprintf("min by (%s) (%s) > %s\nand on (%s) count by (%s) (%s) >= %d",
				peer, r.RecPairHostP50(), num(r.HostDelay.Seconds()), m.LabelPeer, m.LabelPeer, r.RecPairHostP50(), r.MinProbers),
			summary: "{{ $labels.peer }} ({{ $labels.peer_host }}) holds every peer's probes for a median of at least {{ $value | humanizeDuration }}: the host (CPU, interrupts, memory), not the network"},
	}}
	slow := group{name: "rdmabench-agent-latency", interval: promDuration(r.SlowPeriod), rules: []rule{
		{record: r.RecPairNetP50(), expr: fmt.Sprintf("histogram_quantile(0.5, rate(%s_bucket{%s=%q, %s=\"tor\"}[%s]))",
			m.RTT, m.LabelPart, PartNetwork, m.LabelScope, promDuration(r.RegressionWindow))},
		{record: r.RecPairNetBaseline(), expr: fmt.Sprintf("quantile_over_time(0.5, %s[%s] offset %s)",
			r.RecPairNetP50(), promDuration(r.BaselineWindow), promDuration(r.BaselineOffset))},
		{alert: LatencyRegression.String(), severity: "warning", forDur: promDuration(r.RegressionFor),
			expr: fmt.Sprintf("%s > %s * %s\nand %s - %s > %s",
				r.RecPairNetP50(), num(r.RegressionRatio), r.RecPairNetBaseline(),
				r.RecPairNetP50(), r.RecPairNetBaseline(), num(r.RegressionFloor.Seconds())),
			summary: fmt.Sprintf("the network RTT from {{ $labels.local_host }} {{ $labels.local_dev }} to {{ $labels.peer }} is above %s times its baseline for %s", num(r.RegressionRatio), promDuration(r.RegressionFor))},
	}}
	return []group{fast, slow}
}

// The histogram's part label values the rules select (metrics.Part's).
const (
	PartNetwork = "network"
	PartHost    = "host"
)

// WriteYAML writes the rule file Prometheus loads (rule_files:).
func (r Rules) WriteYAML(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# The rdmabench agent's recording and alerting rules (docs/agent.md).\n")
	b.WriteString("# Written by agent/rules (go test ./contrib/prometheus -update): change the\n")
	b.WriteString("# thresholds there, where the simulation reads them too.\n")
	b.WriteString("groups:\n")
	for _, g := range r.groups() {
		fmt.Fprintf(&b, "  - name: %s\n    interval: %s\n    rules:\n", g.name, g.interval)
		for _, ru := range g.rules {
			if ru.record != "" {
				fmt.Fprintf(&b, "      - record: %s\n", ru.record)
			} else {
				fmt.Fprintf(&b, "      - alert: %s\n", ru.alert)
			}
			b.WriteString("        expr: |-\n")
			for _, l := range strings.Split(ru.expr, "\n") {
				fmt.Fprintf(&b, "          %s\n", l)
			}
			if ru.alert != "" {
				if ru.forDur != "" {
					fmt.Fprintf(&b, "        for: %s\n", ru.forDur)
				}
				fmt.Fprintf(&b, "        labels:\n          severity: %s\n", ru.severity)
				fmt.Fprintf(&b, "        annotations:\n          summary: %q\n", ru.summary)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
