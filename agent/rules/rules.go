// Package rules holds the agent's detection rules in one place: the
// thresholds and windows of the Prometheus recording and alerting rules
// (contrib/prometheus/rdmabench-agent.rules.yml is written from them), and
// the definition of the reachable gauge the rules read. The simulation
// (agent/sim) evaluates the same conditions from the same values, so a
// threshold changed here changes both, and the rule file's test fails until
// the file is written again.
package rules

import (
	"fmt"
	"strconv"
	"time"
)

// AgentJob is the job name of Prometheus's scrape of the agents: the scrape
// config must use it (job_name: rdmabench-agent), with each agent's target
// its --listen exactly as the peers file has it, so that the scrape's
// instance label is the peer label its probers give it. The rules read
// the scrape's up of that job to tell an agent (or its host) that is down
// from an RNIC that is: a peer's probers lose it the same way in both
// cases, and only its own scrape tells them apart.
const AgentJob = "rdmabench-agent"

// Reach is when the agent calls a peer unreachable, and when it counts a
// probe lost. Its gauge rdmabench_agent_peer_reachable goes to 0 once
// LostInARow probes in a row go unanswered within Timeout, and back to 1 at
// the next reply, late or not. A run, not a ratio: at 0.01% random loss
// three in a row is a one-in-10¹² event, while a dead peer takes
// LostInARow/rate + Timeout.
//
// A probe is lost (rdmabench_agent_probes_lost_total, what PathLoss reads)
// only when no reply comes within LostAfter; one that comes after Timeout
// but within LostAfter is late (rdmabench_agent_probes_late_total). A
// host that stalls, or a process stopped for a moment, holds replies
// (in its CQ, or its peer's probes in its own): they come late, and
// are not the path's losses. On the rxe target (TCG guests) 3.04% of
// the two-node test's 35 834 healthy probes came later than 50 ms, none
// later than a second.
type Reach struct {
	LostInARow int
	Timeout    time.Duration
	LostAfter  time.Duration
}

// Validate says what is wrong with r.
func (r Reach) Validate() error {
	switch {
	case r.Timeout <= 0 || r.Timeout > time.Minute:
		return fmt.Errorf("probe timeout %v: want more than 0, at most a minute", r.Timeout)
	case r.LostAfter < r.Timeout || r.LostAfter > time.Minute:
		return fmt.Errorf("lost after %v: want at least the probe timeout %v, at most a minute", r.LostAfter, r.Timeout)
	case r.LostInARow < 1 || r.LostInARow > 1000:
		return fmt.Errorf("losses in a row %d: want 1 to 1000", r.LostInARow)
	}
	return nil
}

// Rules are the thresholds and windows of the agent's rules.
type Rules struct {
	// Period is the scrape and fast rules' evaluation interval, and the
	// unit the detection target is stated in ("within 2 periods").
	Period time.Duration

	// RNIC down: at least RNICDownFraction of the peer's ToR-mesh probers
	// see it unreachable, and it has at least MinProbers of them.
	// Unless the peer's own agent says otherwise: it is not scraped (its
	// up is 0: AgentDown's business), or it still reaches any of its own
	// peers, which a dead RNIC, port or cable does not (a restarted agent
	// whose probers still hold its old QP; the healthy half of a fabric
	// whose other half died, which is most of their probers). And that
	// view counts only once the agent has been up and scraped without a
	// break for StartupWindow: a host cut off and back, or an agent just
	// (re)started, shows its peers unreached at its first scrapes, as its
	// probers show it, before its first probes are answered.
	RNICDownFraction float64
	MinProbers       int
	StartupWindow    time.Duration

	// Agent down: Prometheus's scrape of an agent fails for AgentDownFor
	// (a few scrapes in a row, not one that timed out on a busy host).
	AgentDownFor time.Duration

	// Path: one pair loses at least PathLossRatio of its probes over
	// PathWindow while its prober reaches, and its peer is reached by, at
	// least OthersFraction of their other peers (so neither end is down),
	// all through the last SettleWindow: an end that was down (an agent
	// killed, a host or an RNIC gone) leaves its losses in the pair's
	// PathWindow after it is back, and its probers take up to 16 s (the
	// daemon's backoff) to find a restarted agent's new QP, so the pair is
	// judged again only once both have passed; the same for a prober that
	// went unscraped for AgentDownFor in it (its losses then have no
	// record in Prometheus).
	PathLossRatio  float64
	PathWindow     time.Duration
	OthersFraction float64
	SettleWindow   time.Duration

	// Host: every prober's median of the peer's hold time over HostWindow
	// is above HostDelay (the minimum over probers: towards all its peers).
	HostDelay  time.Duration
	HostWindow time.Duration

	// Latency regression: a ToR-mesh pair's median network RTT over
	// RegressionWindow is above RegressionRatio times its baseline, and
	// above it by RegressionFloor (jitter of a few µs is not a regression),
	// for RegressionFor. The baseline is the median of the pair's recorded
	// medians over BaselineWindow ending BaselineOffset ago.
	RegressionWindow time.Duration
	RegressionRatio  float64
	RegressionFloor  time.Duration
	RegressionFor    time.Duration
	BaselineWindow   time.Duration
	BaselineOffset   time.Duration
	// SlowPeriod is the latency rules' evaluation interval: their windows
	// are minutes long, and their histograms heavy to read every second.
	SlowPeriod time.Duration
}

// DefaultReach is the agent's reachable gauge.
var DefaultReach = Reach{LostInARow: 3, Timeout: 50 * time.Millisecond, LostAfter: time.Second}

// Default are the rules contrib/prometheus ships.
func Default() Rules {
	return Rules{
		Period:           time.Second,
		RNICDownFraction: 0.5,
		MinProbers:       3,
		StartupWindow:    10 * time.Second,
		AgentDownFor:     3 * time.Second,
		PathLossRatio:    0.05,
		PathWindow:       time.Minute,
		OthersFraction:   0.5,
		SettleWindow:     2 * time.Minute,
		HostDelay:        time.Millisecond,
		HostWindow:       time.Minute,
		RegressionWindow: 5 * time.Minute,
		RegressionRatio:  1.5,
		RegressionFloor:  20 * time.Microsecond,
		RegressionFor:    5 * time.Minute,
		BaselineWindow:   time.Hour,
		BaselineOffset:   time.Hour,
		SlowPeriod:       time.Minute,
	}
}

// Alert is one of the rules' alerts, typed so that code and tests name
// them without their strings.
type Alert uint8

const (
	RNICDown Alert = iota + 1
	PathLoss
	HostDelay
	LatencyRegression
	AgentDown
)

// Alerts are all of them, in the file's order.
var Alerts = []Alert{AgentDown, RNICDown, PathLoss, HostDelay, LatencyRegression}

// FabricAlerts are those the fabric's own noise can raise (what the
// simulation counts): AgentDown is a failed scrape, not a probe.
var FabricAlerts = []Alert{RNICDown, PathLoss, HostDelay, LatencyRegression}

// String is the alert's name in Prometheus.
func (a Alert) String() string {
	switch a {
	case RNICDown:
		return "RDMABenchAgentRNICDown"
	case PathLoss:
		return "RDMABenchAgentPathLoss"
	case HostDelay:
		return "RDMABenchAgentHostDelay"
	case LatencyRegression:
		return "RDMABenchAgentLatencyRegression"
	case AgentDown:
		return "RDMABenchAgentDown"
	}
	return fmt.Sprintf("Alert(%d)", uint8(a))
}

// promDuration writes d as Prometheus writes a duration: 1s, 5m, 1h.
func promDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
}

// num writes a threshold as PromQL reads it, shortest exact form.
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Validate says what is wrong with r, for a caller that takes them from
// flags.
func (r Rules) Validate() error {
	switch {
	case r.Period < time.Millisecond:
		return fmt.Errorf("period %v below 1ms", r.Period)
	case r.RNICDownFraction <= 0 || r.RNICDownFraction > 1:
		return fmt.Errorf("RNIC-down fraction %v outside (0, 1]", r.RNICDownFraction)
	case r.MinProbers < 1:
		return fmt.Errorf("min probers %d below 1", r.MinProbers)
	case r.StartupWindow < r.Period:
		return fmt.Errorf("startup window %v shorter than the period %v", r.StartupWindow, r.Period)
	case r.SettleWindow < r.PathWindow:
		return fmt.Errorf("settle window %v shorter than the path window %v", r.SettleWindow, r.PathWindow)
	}
	return nil
}
