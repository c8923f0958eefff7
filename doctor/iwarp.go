package doctor

// iwarpRemedy says what to do instead: NCCL's IB transport has no rdma_cm
// path, so an iWARP NIC is for TCP or for a plugin that connects with
// rdma_cm.
const iwarpRemedy = "leave it out of NCCL_IB_HCA (^DEV) and use an InfiniBand or RoCE device; irdma can run RoCE v2 instead (modprobe irdma roce_ena=1); otherwise carry NCCL over TCP on its netdev (NCCL_SOCKET_IFNAME) or use a net plugin that connects with rdma_cm"

// checkIWARP (nccl.iwarp): NCCL's IB transport exchanges QP numbers over
// its own socket and moves the QPs to RTR/RTS with ibv_modify_qp; iWARP
// QPs can only be connected through rdma_cm, so NCCL lists the device and
// then fails to connect over it. Named in NCCL_IB_HCA it is a FAIL; picked
// only because NCCL_IB_HCA is unset, a WARN (another device may carry the
// job, but NCCL tries this one too). A capture without node_type is told
// by what the drivers write elsewhere (rdmasys.TellIWARP), and the finding
// says so and points at the file that told.
func checkIWARP(h *host) []Finding {
	var out []Finding
	_, hcaSet := h.listEnv("NCCL_IB_HCA")
	for _, d := range h.devs {
		clue, ok := h.iwarp[d.Name]
		if !ok {
			continue
		}
		f := Finding{Check: "nccl.iwarp", Subject: d.Name, Source: clue.Path,
			Value:  "iWARP device (" + clue.String() + "): NCCL's IB transport cannot connect over it without rdma_cm",
			Status: Warn, Remedy: iwarpRemedy}
		if hcaSet {
			f.Status = Fail
		}
		out = append(out, h.scopedDev(d.Name, f))
	}
	return out
}
