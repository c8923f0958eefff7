package rules

import "time"

// The alerts' conditions in Go, as the rule file writes them in PromQL
// (the same fields, the same comparisons: rules_test checks each
// comparison of the file against these at its threshold). The simulation
// evaluates these.

// RNICDownFires is RNICDown's condition for one peer: unreached of its
// probers ToR-mesh probers see it unreachable.
func (r Rules) RNICDownFires(unreached, probers int) bool {
	return probers >= r.MinProbers && float64(unreached)/float64(probers) >= r.RNICDownFraction
}

// PathLossFires is PathLoss's for one pair: its loss ratio over the
// window, the fraction of its peers the prober reaches, and the fraction
// of the peer's probers that see it unreachable.
func (r Rules) PathLossFires(lossRatio, localReach, peerUnreachedAll float64) bool {
	return lossRatio >= r.PathLossRatio && localReach >= r.OthersFraction && peerUnreachedAll < 1-r.OthersFraction
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
