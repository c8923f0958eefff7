package engine

import "github.com/rdmabench/rdmabench/csrc"

// Verification (--verify) gives message n of a QP its own slot (n-1) % slots
// and pattern base+n. SEND receivers check each message as it lands (in C).
// One-sided operations are checked after the run, from what each slot must
// hold then: the last message written into it (WRITE, on the target), or the
// target's fixed contents (READ, on the reader).

// lastInSlot is the number of the last of count messages that used slot s.
func lastInSlot(count uint64, slots, s int) uint64 {
	n := uint64(s + 1)
	if count < n {
		return 0
	}
	return n + (count-n)/uint64(slots)*uint64(slots)
}

// checkWrites counts bad bytes in the recv regions of the first len(counts)
// QPs after the peer wrote counts[i] messages (its last call) into QP i's.
func (st *step) checkWrites(counts []uint64) uint64 {
	var bad uint64
	for qi, c := range counts {
		if qi >= st.nqp {
			break
		}
		region := st.s.recvRegion(qi)
		for s := 0; s < st.s.slots; s++ {
			n := lastInSlot(c, st.s.slots, s)
			if n == 0 {
				break
			}
			off := s * st.s.stride
			bad += csrc.PatternCheck(region[off:off+st.size], verifySeed(st.size), st.patternBase()+n)
		}
	}
	return bad
}

// fillReadTargets writes the fixed pattern READs will fetch: slot s of each
// recv region holds pattern s+1. The test hook damages the first slot.
func (st *step) fillReadTargets() {
	for qi := 0; qi < st.nqp; qi++ {
		region := st.s.recvRegion(qi)
		for s := 0; s < st.s.slots; s++ {
			off := s * st.s.stride
			csrc.Pattern(region[off:off+st.size], verifySeed(st.size), uint64(s+1))
		}
		if corruptHook() > 0 {
			region[st.size/2] ^= 0x5a
		}
	}
}

// checkReads counts bad bytes in what READs fetched into the send regions.
func (st *step) checkReads(counts []uint64) uint64 {
	var bad uint64
	for qi, c := range counts {
		region := st.s.sendRegion(qi)
		for s := 0; s < st.s.slots && uint64(s) < c; s++ {
			off := s * st.s.stride
			bad += csrc.PatternCheck(region[off:off+st.size], verifySeed(st.size), uint64(s+1))
		}
	}
	return bad
}

// patternBase is the number of messages before the measured call: the
// warm-up's, in iteration mode.
func (st *step) patternBase() uint64 {
	if st.plan.Duration > 0 {
		return 0
	}
	return st.plan.Warmup
}
