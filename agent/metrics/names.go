package metrics

// The families the agent exports.
const (
	RTT           = "rdmabench_agent_rtt_seconds"
	ProbesSent    = "rdmabench_agent_probes_sent_total"
	ProbesLost    = "rdmabench_agent_probes_lost_total"
	ProbesLate    = "rdmabench_agent_probes_late_total"
	PeerReachable = "rdmabench_agent_peer_reachable"
	LastSuccess   = "rdmabench_agent_peer_last_success_timestamp_seconds"
	CPUSeconds    = "rdmabench_agent_cpu_seconds_total"
	ProbeBudget   = "rdmabench_agent_probe_budget_per_second"
	Peers         = "rdmabench_agent_peers"
	Datagrams     = "rdmabench_agent_datagrams_total"
	StartTime     = "rdmabench_agent_start_time_seconds"
)

// The labels they carry.
const (
	LabelLocalHost = "local_host" // this agent's host
	LabelLocalDev  = "local_dev"  // this agent's RNIC (-d), "" for a node's agent
	LabelPeer      = "peer"       // the peer agent's HOST:PORT: one per RNIC
	LabelPeerHost  = "peer_host"
	LabelPeerToR   = "peer_tor"
	LabelScope     = "scope"   // pinglist.Scope: "tor" or "remote"
	LabelPart      = "part"    // Part: "network" or "host"
	LabelClock     = "clock"   // Clock: "cqe" or "cpu"
	LabelOutcome   = "outcome" // what became of a datagram the agent received: Outcome
)

// Names are every family the agent exports (the dashboard's test checks
// its queries against them).
func Names() []string {
	return []string{RTT, ProbesSent, ProbesLost, ProbesLate, PeerReachable, LastSuccess, CPUSeconds, ProbeBudget, Peers, Datagrams, StartTime}
}

// LabelNames are every label on them.
func LabelNames() []string {
	return []string{LabelLocalHost, LabelLocalDev, LabelPeer, LabelPeerHost, LabelPeerToR, LabelScope, LabelPart, LabelClock, LabelOutcome}
}
