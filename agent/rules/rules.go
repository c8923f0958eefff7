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

// Reach is when the agent calls a peer unreachable: its gauge
// rdmabench_agent_peer_reachable goes to 0 once LostInARow probes in a row
// are lost (no reply within Timeout), and back to 1 at the next reply. A
// run of losses, not a ratio: at 0.01% random loss three in a row is a
// one-in-10¹² event, while a dead peer takes LostInARow/rate + Timeout.
type Reach struct {
	LostInARow int
	Timeout    time.Duration
}

// Rules are the thresholds and windows of the agent's rules.
type Rules struct {
	// Period is the scrape and fast rules' evaluation interval, and the
	// unit the detection target is stated in ("within 2 periods").
	Period time.Duration

	// RNIC down: at least RNICDownFraction of the peer's ToR-mesh probers
	// see it unreachable, and it has at least MinProbers of them.
	RNICDownFraction float64
	MinProbers       int

	// Path: one pair loses at least PathLossRatio of its probes over
	// PathWindow while its prober reaches, and its peer is reached by, at
	// least OthersFraction of their other peers (so neither end is down).
	PathLossRatio  float64
	PathWindow     time.Duration
	OthersFraction float64

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
var DefaultReach = Reach{LostInARow: 3, Timeout: 50 * time.Millisecond}

// Default are the rules contrib/prometheus ships.
func Default() Rules {
	return Rules{
		Period:           time.Second,
		RNICDownFraction: 0.5,
		MinProbers:       3,
		PathLossRatio:    0.05,
		PathWindow:       time.Minute,
		OthersFraction:   0.5,
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
)

// Alerts are all of them, in the file's order.
var Alerts = []Alert{RNICDown, PathLoss, HostDelay, LatencyRegression}

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
	}
	return nil
}
