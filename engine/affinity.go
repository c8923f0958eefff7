package engine

import (
	"fmt"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/internal/intlist"
	"github.com/rdmabench/rdmabench/rdmasys"
	"github.com/rdmabench/rdmabench/verbs"
)

// nicCPUs are the CPUs of the device's NUMA node, where its loops should run;
// nil when sysfs does not say (then threads are not pinned).
func nicCPUs(dev string) []int {
	node := rdmasys.DeviceNUMANode(verbs.SysfsRoot, dev)
	if node < 0 {
		return nil
	}
	cpus, err := rdmasys.NodeCPUs(verbs.SysfsRoot, node)
	if err != nil {
		return nil
	}
	return cpus
}

// resolveCPUs is the CPU list a side's loops take: the configured one, else
// the NIC's NUMA node; nil means unpinned.
func resolveCPUs(dc DeviceConfig, dev string) []int {
	if dc.CPUs != nil {
		return dc.CPUs
	}
	return nicCPUs(dev)
}

// allowedCPUs drops the CPUs this process may not run on (a container's
// cpuset, taskset), so that the header shows the CPUs actually used.
func allowedCPUs(list []int) (ok, dropped []int) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return list, nil
	}
	for _, c := range list {
		if c >= 0 && set.IsSet(c) {
			ok = append(ok, c)
		} else {
			dropped = append(dropped, c)
		}
	}
	return ok, dropped
}

// loopCPUs is the list a side pins its loop threads to, in turn. A server
// left to the NIC's node takes its CPUs from the end of the list, so that a
// client on the same host (taking them from the start) does not busy-poll
// the same CPU. A plan whose loops outnumber the CPUs is refused unless the
// plan allows sharing: two spinning loops on one CPU measure the scheduler.
func (s *side) loopCPUs(dc DeviceConfig, dev string, plan Plan) ([]int, error) {
	cpus := resolveCPUs(dc, dev)
	if cpus == nil {
		return nil, nil
	}
	cpus, dropped := allowedCPUs(cpus)
	if len(dropped) > 0 {
		s.warnf("CPUs %s are not available to this process (cpuset or affinity); using %s", intlist.Comma(dropped), intlist.Comma(cpus))
	}
	if len(cpus) == 0 {
		return nil, nil
	}
	if dc.CPUs == nil && dc.fromEnd {
		cpus = slices.Clone(cpus)
		slices.Reverse(cpus)
	}
	if n := loopThreads(plan); n > len(cpus) && !plan.ShareCPUs {
		return nil, fmt.Errorf("%d busy-polling loop threads would share %d CPUs (%s): give more with --cpus, fewer --threads or QPs, or allow it with --share-cpus", n, len(cpus), intlist.Comma(cpus))
	}
	return cpus, nil
}

// splitCPUs gives the two sides of a loopback run disjoint CPUs: the first
// half of list to the client, the rest to the server. With one CPU both get
// it (the plan is then refused unless sharing is allowed).
func splitCPUs(list []int) (client, server []int) {
	if len(list) < 2 {
		return list, list
	}
	h := (len(list) + 1) / 2
	return list[:h], list[h:]
}

// pinThread locks the calling goroutine to its OS thread and that thread to
// cpu. The goroutine must end still locked: the runtime then discards the
// thread instead of handing a thread pinned to a loop's CPU to other
// goroutines.
func pinThread(cpu int) error {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread outlives its goroutine; left pinned, it would
		// stay so. Programs keep it to their main goroutine (rdmabench
		// does).
		return fmt.Errorf("a loop landed on the main thread, which is not pinned")
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin a loop thread to CPU %d: %w", cpu, err)
	}
	return nil
}

// pinned runs f on a thread pinned to cpu (when cpu ≥ 0). Call it only from
// a goroutine that ends when f returns. A failed pin is a warning: the loop
// runs where the scheduler puts it.
func (st *step) pinned(cpu int, f func()) {
	if cpu >= 0 {
		if err := pinThread(cpu); err != nil {
			st.s.warnf("%v; the loop runs unpinned", err)
		}
	}
	f()
}
