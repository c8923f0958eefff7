package rules

import "time"

// The alerts' conditions in Go, as the rule file writes them in PromQL
// (the same fields, the same comparisons: rules_test checks each
// comparison of the file against these at its threshold). The simulation
// evaluates these.

// OwnView is a peer's own agent as the rules read it: Scraped, whether
// Prometheus scrapes it at all (in the agents' job; if not, only its
// probers judge it); UpFor, how long since it started or a scrape of it
// last failed (0: the last one failed); Reach, the fraction of its own
// peers it reached at its last scrape.
type OwnView struct {
	Scraped bool
	UpFor   time.Duration
	Reach   float64
}

// RNICDownFires is RNICDown's condition for one peer: unreached of its
// probers ToR-mesh probers see it unreachable, and its own agent, scraped
// without a break for StartupWindow, reaches none of its own peers (a
// dead RNIC, port or cable).
func (r Rules) RNICDownFires(unreached, probers int, own OwnView) bool {
	if !r.RNICDownSeen(unreached, probers) {
		return false
	}
	return !own.Scraped || own.UpFor >= r.StartupWindow && !(own.Reach > 0)
}

// RNICDownSeen is the probers' part of RNICDown alone.
func (r Rules) RNICDownSeen(unreached, probers int) bool {
	return probers >= r.MinProbers && float64(unreached)/float64(probers) >= r.RNICDownFraction
}

// AgentDownFires is AgentDown's: the agent's scrapes have failed for
// downFor.
func (r Rules) AgentDownFires(downFor time.Duration) bool {
	return downFor >= r.AgentDownFor
}

// PathLossFires is PathLoss's for one pair: its loss ratio over the
// window, the least fraction of its peers the prober reached, and the
// most of the peer's probers that saw it unreachable, both over the
// SettleWindow, and whether the prober's agent was down (unscraped for
// AgentDownFor) in that window.
func (r Rules) PathLossFires(lossRatio, leastLocalReach, mostPeerUnreachedAll float64, proberDown bool) bool {
	return lossRatio >= r.PathLossRatio && leastLocalReach >= r.OthersFraction && mostPeerUnreachedAll < 1-r.OthersFraction && !proberDown
}

// HostDelayFires is HostDelay's for one peer: the least of its probers'
// median hold times over the window, and how many probe it.
func (r Rules) HostDelayFires(minMedianHold time.Duration, probers int) bool {
	return minMedianHold.Seconds() > r.HostDelay.Seconds() && probers >= r.MinProbers
}

// LatencyRegressionFires is LatencyRegression's for one pair (before its
// for: RegressionFor): the median network RTT now and its baseline.
func (r Rules) LatencyRegressionFires(now, baseline time.Duration) bool {
	return now.Seconds() > r.RegressionRatio*baseline.Seconds() && now.Seconds()-baseline.Seconds() > r.RegressionFloor.Seconds()
}
