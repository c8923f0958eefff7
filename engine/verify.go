package engine

import (
	"bytes"
	"fmt"

	"github.com/rdmabench/rdmabench/csrc"
)

// Verification (--verify) gives message n of a QP its own slot (n-1) % slots
// and pattern base+n. SEND receivers check each message as it lands (in C).
// One-sided operations are checked after the run, from what each slot must
// hold then: the last message written into it (WRITE, on the target), or the
// target's fixed contents (READ, on the reader).
//
// When either side's buffers are GPU memory (Plan.deviceMemory) every
// message carries pattern 1 instead: a GPU side's CPU cannot write each
// message or read each one as it lands, so it fills its send slots before a
// measurement and clears its receive slots, and checks what landed after it,
// all through cudaMemcpy. A host side in such a plan still fills and checks
// every message in the loops, with pattern 1.

// lastInSlot is the number of the last of count messages that used slot s.
func lastInSlot(count uint64, slots, s int) uint64 {
	n := uint64(s + 1)
	if count < n {
		return 0
	}
	return n + (count-n)/uint64(slots)*uint64(slots)
}

// slotPattern is the pattern message n carries.
func (st *step) slotPattern(n uint64) uint64 {
	if st.plan.DeviceMemory() {
		return 1
	}
	return st.patternBase() + n
}

// checkWrites counts bad bytes in the recv regions of the first len(counts)
// QPs after the peer wrote counts[i] messages (its last call) into QP i's.
func (st *step) checkWrites(counts []uint64) (uint64, error) {
	var bad uint64
	for qi, c := range counts {
		if qi >= st.nqp {
			break
		}
		region, err := st.s.mem.read(st.s.recvOffset(qi), st.s.region)
		if err != nil {
			return bad, fmt.Errorf("--verify: read back QP %d's receive region: %w", qi, err)
		}
		for s := 0; s < st.s.slots; s++ {
			n := lastInSlot(c, st.s.slots, s)
			if n == 0 {
				break
			}
			off := s * st.s.stride
			bad += csrc.PatternCheck(region[off:off+st.size], verifySeed(st.size), st.slotPattern(n))
		}
	}
	return bad, nil
}

// fillReadTargets writes the fixed pattern READs will fetch: slot s of each
// recv region holds pattern s+1. The test hook damages the first slot.
func (st *step) fillReadTargets() error {
	for qi := 0; qi < st.nqp; qi++ {
		region := make([]byte, st.s.region)
		for s := 0; s < st.s.slots; s++ {
			off := s * st.s.stride
			csrc.Pattern(region[off:off+st.size], verifySeed(st.size), uint64(s+1))
		}
		if hooks().CorruptMessage > 0 {
			region[st.size/2] ^= 0x5a
		}
		if err := st.s.mem.write(st.s.recvOffset(qi), region); err != nil {
			return fmt.Errorf("--verify: fill QP %d's READ targets: %w", qi, err)
		}
	}
	return nil
}

// checkReads counts bad bytes in what READs fetched into the send regions.
func (st *step) checkReads(counts []uint64) (uint64, error) {
	var bad uint64
	for qi, c := range counts {
		region, err := st.s.mem.read(st.s.sendOffset(qi), st.s.region)
		if err != nil {
			return bad, fmt.Errorf("--verify: read back QP %d's READ results: %w", qi, err)
		}
		for s := 0; s < st.s.slots && uint64(s) < c; s++ {
			off := s * st.s.stride
			bad += csrc.PatternCheck(region[off:off+st.size], verifySeed(st.size), uint64(s+1))
		}
	}
	return bad, nil
}

// prepareGPUVerify readies a GPU side for a measurement with --verify: every
// send slot holds the plan's one pattern (the test hook damages QP 0's first
// slot, so every message sent from it is bad), and every receive slot is
// zeroed, so that checkGPURecvs can tell a slot nothing landed in. A no-op on
// host memory, whose loops fill and check each message.
func (st *step) prepareGPUVerify() error {
	if !st.plan.Verify || st.s.mem.gpu == nil || st.plan.Test.Op() == OpRead {
		return nil
	}
	msg := make([]byte, st.size)
	csrc.Pattern(msg, verifySeed(st.size), 1)
	send := make([]byte, st.s.region)
	for s := 0; s < st.s.slots; s++ {
		copy(send[s*st.s.stride:], msg)
	}
	zero := make([]byte, st.s.region)
	for qi := 0; qi < st.nqp; qi++ {
		buf := send
		if qi == 0 && hooks().CorruptMessage > 0 {
			buf = bytes.Clone(send)
			buf[st.size/2] ^= 0x5a
		}
		if err := st.s.mem.write(st.s.sendOffset(qi), buf); err != nil {
			return fmt.Errorf("--verify: fill QP %d's send slots: %w", qi, err)
		}
		if err := st.s.mem.write(st.s.recvOffset(qi), zero); err != nil {
			return fmt.Errorf("--verify: clear QP %d's receive slots: %w", qi, err)
		}
	}
	return nil
}

// checkGPURecvs checks, after a SEND measurement, the receive slots of a GPU
// side that received messages: a slot still all zero received nothing (a
// short run need not reach every slot); any other must hold the pattern.
// Which message landed in which slot is not known here, only that each
// carries pattern 1, so this is weaker than the host loops' check of every
// message. A QP that received but left every slot zero counts its whole
// first slot as bad.
func (st *step) checkGPURecvs(received uint64) (uint64, error) {
	if !st.plan.Verify || st.s.mem.gpu == nil || received == 0 {
		return 0, nil
	}
	want := make([]byte, st.size)
	csrc.Pattern(want, verifySeed(st.size), 1)
	var bad uint64
	used := 0
	for qi := 0; qi < st.nqp; qi++ {
		region, err := st.s.mem.read(st.s.recvOffset(qi), st.s.region)
		if err != nil {
			return bad, fmt.Errorf("--verify: read back QP %d's receive slots: %w", qi, err)
		}
		for s := 0; s < st.s.slots; s++ {
			slot := region[s*st.s.stride : s*st.s.stride+st.size]
			if allZero(slot) {
				continue
			}
			used++
			bad += csrc.PatternCheck(slot, verifySeed(st.size), 1)
		}
	}
	if used == 0 {
		bad += uint64(st.size)
	}
	return bad, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// patternBase is the number of messages before the measured call: the
// warm-up's, in iteration mode.
func (st *step) patternBase() uint64 {
	if st.plan.Duration > 0 {
		return 0
	}
	return st.plan.Warmup
}
