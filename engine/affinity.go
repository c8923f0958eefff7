package engine

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

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

// pinThread locks the calling goroutine to its OS thread and that thread to
// cpu. On success the caller runs runtime.UnlockOSThread when done (the
// affinity stays with the thread, which is then left to the runtime).
func pinThread(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("pin thread to CPU %d: %w", cpu, err)
	}
	return nil
}
