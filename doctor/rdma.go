package doctor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
	"golang.org/x/sys/unix"
)

// checkDevices: is there any RDMA device at all?
func checkDevices(h *host) []Finding {
	src := h.sysPath(rdmasys.ClassDir)
	var out []Finding
	for _, err := range h.devErrs {
		if h.opts.Capture {
			// A capture may list a device whose directory it did not copy
			// (hwloc's gather keeps class links to virtual devices).
			out = append(out, Finding{Check: "rdma.devices", Status: Skip, Subject: "host", Source: src,
				Value: "unreadable device: " + err.Error() + "; " + notCaptured("its device directory", "that device")})
			continue
		}
		out = append(out, Finding{Check: "rdma.devices", Status: Fail, Subject: "host",
			Value: "unreadable device: " + err.Error(), Source: src,
			Remedy: "check the driver's kernel log (dmesg | grep -i mlx5) and reload it"})
	}
	if len(h.devs) == 0 {
		return append(out, Finding{Check: "rdma.devices", Status: Fail, Subject: "host",
			Value: "no RDMA devices", Source: src,
			Remedy: "load the NIC's RDMA driver (modprobe mlx5_ib); for a test setup add a soft device: rdma link add rxe0 type rxe netdev eth0"})
	}
	return append(out, Finding{Check: "rdma.devices", Status: Pass, Subject: "host",
		Value: fmt.Sprintf("%d device(s): %s", len(h.devs), strings.Join(h.deviceNames(), ", ")), Source: src})
}

// checkUverbs: every device needs a uverbs character device that this
// process can open read-write, or no verbs program can use it. Containers
// that see /sys but not /dev/infiniband are the common failure.
func checkUverbs(h *host) []Finding {
	if len(h.devs) == 0 {
		return []Finding{{Check: "rdma.uverbs", Status: Skip, Subject: "host", Value: "no RDMA devices"}}
	}
	if !h.hasDir(rdmasys.UverbsClassDir) && !h.hasDir("module") {
		return []Finding{{Check: "rdma.uverbs", Status: Skip, Subject: "host", Source: h.sysPath(rdmasys.UverbsClassDir),
			Value: notCaptured("class/infiniband_verbs and module/", "which devices have a uverbs node")}}
	}
	m, err := rdmasys.UverbsDevices(h.opts.SysRoot)
	if err != nil {
		return []Finding{{Check: "rdma.uverbs", Status: Fail, Subject: "host", Value: err.Error(),
			Source: h.sysPath(rdmasys.UverbsClassDir), Remedy: "modprobe ib_uverbs"}}
	}
	var out []Finding
	for _, d := range h.devs {
		out = append(out, h.scopedDev(d.Name, uverbsFinding(h, d.Name, m[d.Name])))
	}
	return out
}

func uverbsFinding(h *host, dev, uverbs string) Finding {
	f := Finding{Check: "rdma.uverbs", Subject: dev}
	if uverbs == "" {
		f.Status, f.Value, f.Source = Fail, "no uverbs device bound", h.sysPath(rdmasys.UverbsClassDir)
		f.Remedy = "modprobe ib_uverbs"
		return f
	}
	if !h.hasDevRoot() {
		f.Status, f.Source = Skip, h.opts.DevRoot
		f.Value = uverbs + " bound; " + notCaptured("dev/", "whether its device node exists and opens")
		return f
	}
	path := filepath.Join(h.opts.DevRoot, "infiniband", uverbs)
	f.Source = path
	if _, err := os.Stat(path); err != nil {
		f.Status, f.Value = Fail, uverbs+" missing"
		f.Remedy = "in a container, run with --device=/dev/infiniband (Kubernetes: the RDMA device plugin); on a host, check that udev created /dev/infiniband"
		return f
	}
	// A read-only mount does not stop writes to a device node, but access(2)
	// reports EROFS for the regular files of a captured tree on one: only a
	// permission error counts.
	if err := unix.Access(path, unix.R_OK|unix.W_OK); err != nil && !errors.Is(err, unix.EROFS) {
		f.Status, f.Value = Fail, fmt.Sprintf("%s not readable and writable by uid %d", uverbs, os.Getuid())
		f.Remedy = "grant access to /dev/infiniband/uverbs* (rdma-core's udev rules make them 0666), or run with --device=/dev/infiniband"
		return f
	}
	f.Status, f.Value = Pass, uverbs+" read-write"
	return f
}

// checkModules: ib_uverbs carries verbs to user space; rdma_ucm carries
// rdma_cm connection setup (used by rdmabench --cm, MPI and UCX; NCCL does
// not need it). Built-in modules may lack a sysfs entry, so a present device
// node counts as proof too.
func checkModules(h *host) []Finding {
	if !h.hasDir("module") {
		// Every live sysfs has module/; a tree without it is a capture
		// that left it out, and says nothing about what is loaded.
		return []Finding{{Check: "rdma.modules", Status: Skip, Subject: "host", Source: h.sysPath("module"),
			Value: notCaptured("module/", "which kernel modules are loaded")}}
	}
	uverbsNodes, _ := filepath.Glob(filepath.Join(h.opts.DevRoot, "infiniband", "uverbs*"))
	_, cmErr := os.Stat(filepath.Join(h.opts.DevRoot, "infiniband", "rdma_cm"))
	mods := []struct {
		name    string
		proof   bool
		miss    Status
		purpose string
	}{
		{"ib_uverbs", len(uverbsNodes) > 0, Fail, "user-space verbs"},
		{"rdma_ucm", cmErr == nil, Warn, "rdma_cm connection setup"},
	}
	var out []Finding
	for _, m := range mods {
		f := Finding{Check: "rdma.modules", Subject: m.name, Source: h.sysPath("module", m.name)}
		switch {
		case rdmasys.ModuleLoaded(h.opts.SysRoot, m.name):
			f.Status, f.Value = Pass, "loaded"
		case m.proof:
			f.Status, f.Value = Pass, "built in (device node present)"
		default:
			f.Status, f.Value = m.miss, "not loaded: no "+m.purpose
			f.Remedy = "modprobe " + m.name + " (and add it to /etc/modules-load.d/ so it survives reboots)"
		}
		out = append(out, f)
	}
	return out
}
