package doctor

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/internal/intlist"
	"github.com/rdmabench/rdmabench/rdmasys"
)

// memlockMin is the locked-memory limit below which registering NCCL's and
// the application's buffers fails outright (NCCL alone pins several MiB per
// channel and peer); docker's 64 KiB and systemd's 8 MiB defaults are below.
const memlockMin = 64 << 20

// capIPCLock is CAP_IPC_LOCK's bit: with it, the kernel does not enforce
// RLIMIT_MEMLOCK on memory registration.
const capIPCLock = 14

// memlockRemedy covers the places the limit is set.
const memlockRemedy = "raise it to unlimited: ulimit -l unlimited in the job, '* - memlock unlimited' in /etc/security/limits.conf, LimitMEMLOCK=infinity for systemd units, --ulimit memlock=-1 for docker"

// checkMemlock reads RLIMIT_MEMLOCK from <proc>/self/limits.
func checkMemlock(h *host) []Finding {
	src := h.procPath("self", "limits")
	f := Finding{Check: "host.memlock", Subject: "host", Source: src}
	soft, hard, err := readMemlock(src)
	if err != nil {
		f.Status, f.Value = Skip, err.Error()
		return []Finding{f}
	}
	f.Value = "soft " + fmtLimit(soft) + ", hard " + fmtLimit(hard)
	switch {
	case soft == unlimited:
		f.Status = Pass
	case hasCap(h.procPath("self", "status"), capIPCLock):
		f.Status, f.Value = Pass, f.Value+"; not enforced: CAP_IPC_LOCK held"
	case soft < memlockMin:
		f.Status, f.Value, f.Remedy = Fail, f.Value+", too small to register buffers", memlockRemedy
	default:
		f.Status, f.Value, f.Remedy = Warn, f.Value+", large jobs may fail to register buffers", memlockRemedy
	}
	return []Finding{f}
}

// unlimited is RLIM_INFINITY as parseLimit returns it.
const unlimited = math.MaxUint64

// nearInfinity is where a limit stops being a number someone set: rlimits
// are unsigned 64-bit, and RLIM_INFINITY converted through other units
// (18446744073708503040 is 2^64 - 2^20, infinity rounded to MiB by a
// container runtime) lands just below 2^64.
const nearInfinity = 1 << 62

// readMemlock parses the "Max locked memory" line.
func readMemlock(path string) (soft, hard uint64, err error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("read limits: %w", err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Max locked memory")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			break
		}
		if soft, err = parseLimit(f[0]); err == nil {
			hard, err = parseLimit(f[1])
		}
		return soft, hard, err
	}
	return 0, 0, fmt.Errorf("no \"Max locked memory\" line in %s", path)
}

// parseLimit reads a limits field; "unlimited" and the maxima near 2^64
// are unlimited.
func parseLimit(s string) (uint64, error) {
	if s == "unlimited" {
		return unlimited, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad limit %q", s)
	}
	if n >= nearInfinity {
		return unlimited, nil
	}
	return n, nil
}

func fmtLimit(n uint64) string {
	switch {
	case n == unlimited:
		return "unlimited"
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// hasCap reports whether the CapEff mask in a status file has the bit set.
func hasCap(statusPath string, bit uint) bool {
	b, err := os.ReadFile(statusPath)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<bit) != 0
		}
	}
	return false
}

// sysctlRule is one tuning-guide value. These only matter for TCP traffic
// (NCCL bootstrap, socket fallback, storage), so a miss is a WARN.
type sysctlRule struct {
	key    string // dotted name
	min    int64  // for numeric values: at least this (last field for triples)
	oneOf  []string
	advice string
}

var sysctlRules = []sysctlRule{
	{key: "net.core.rmem_max", min: 134217728, advice: "134217728"},
	{key: "net.core.wmem_max", min: 134217728, advice: "134217728"},
	{key: "net.ipv4.tcp_rmem", min: 134217728, advice: "4096 87380 134217728"},
	{key: "net.ipv4.tcp_wmem", min: 134217728, advice: "4096 65536 134217728"},
	{key: "net.core.netdev_max_backlog", min: 250000, advice: "250000"},
	{key: "net.ipv4.tcp_congestion_control", oneOf: []string{"bbr", "htcp"}, advice: "bbr"},
	{key: "net.ipv4.tcp_mtu_probing", min: 1, advice: "1"},
}

// checkSysctls compares network sysctls with the values the 100G tuning
// guides use.
func checkSysctls(h *host) []Finding {
	var out []Finding
	for _, r := range sysctlRules {
		out = append(out, sysctlFinding(h, r))
	}
	return out
}

// sysctlPath is a dotted key's file under procfs.
func (h *host) sysctlPath(key string) string {
	return h.procPath(append([]string{"sys"}, strings.Split(key, ".")...)...)
}

// readSysctl reads a sysctl with its whitespace normalized ("4096 87380 6291456").
func (h *host) readSysctl(key string) (string, error) {
	b, err := os.ReadFile(h.sysctlPath(key))
	if err != nil {
		return "", err
	}
	return strings.Join(strings.Fields(string(b)), " "), nil
}

func sysctlFinding(h *host, r sysctlRule) Finding {
	f := Finding{Check: "host.sysctl", Subject: r.key, Source: h.sysctlPath(r.key)}
	val, err := h.readSysctl(r.key)
	if err != nil {
		f.Status, f.Value = Skip, "unreadable"
		return f
	}
	f.Value = val
	ok := false
	if len(r.oneOf) > 0 {
		ok = slices.Contains(r.oneOf, val)
	} else if fields := strings.Fields(val); len(fields) > 0 {
		n, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
		ok = err == nil && n >= r.min
	}
	if ok {
		f.Status = Pass
		return f
	}
	f.Status = Warn
	f.Value += ", guides use " + r.advice
	f.Remedy = fmt.Sprintf("sysctl -w %s=%q and persist it in /etc/sysctl.d/", r.key, r.advice)
	return f
}

// checkIRQs: NIC interrupts all landing on one CPU cap receive processing;
// either irqbalance spreads them or they are spread by hand.
func checkIRQs(h *host) []Finding {
	f := Finding{Check: "host.irq", Subject: "host"}
	if pid := findProcess(h.opts.ProcRoot, "irqbalance"); pid != "" {
		f.Status, f.Value, f.Source = Pass, "irqbalance running (pid "+pid+")", h.procPath(pid, "comm")
		return []Finding{f}
	}
	if len(h.pci) == 0 {
		f.Status, f.Value = Skip, "irqbalance not running; no PCI RDMA device whose IRQs to inspect"
		return []Finding{f}
	}
	var out []Finding
	for _, d := range h.devs {
		p, ok := h.pci[d.Name]
		if !ok {
			continue
		}
		out = append(out, irqSpreadFinding(h, d.Name, p))
	}
	return out
}

func irqSpreadFinding(h *host, dev string, p rdmasys.PCIDevice) Finding {
	f := Finding{Check: "host.irq", Subject: dev, Source: filepath.Join(p.Dir, "msi_irqs")}
	irqs, err := rdmasys.MSIIRQs(p.Dir)
	if err != nil || len(irqs) == 0 {
		f.Status, f.Value = Skip, "irqbalance not running; no MSI IRQs listed"
		return f
	}
	cpus := map[int]bool{}
	for _, irq := range irqs {
		for _, c := range irqCPUs(h, irq) {
			cpus[c] = true
		}
	}
	list := make([]int, 0, len(cpus))
	for c := range cpus {
		list = append(list, c)
	}
	slices.Sort(list)
	if len(list) == 0 {
		// No affinity readable: where the IRQs land is unknown, not one CPU.
		f.Source = h.procPath("irq")
		f.Status, f.Value = Skip, fmt.Sprintf("%d MSI IRQs; no proc/irq/N/*_affinity_list readable, so where they land cannot be told", len(irqs))
		if h.opts.Capture {
			f.Value = fmt.Sprintf("%d MSI IRQs; ", len(irqs)) + notCaptured("proc/irq/", "which CPUs take them or whether irqbalance runs")
		}
		return f
	}
	f.Value = fmt.Sprintf("irqbalance not running; %d IRQs on CPU(s) %s", len(irqs), fmtCPUs(list))
	if len(list) > 1 {
		f.Status = Pass
		return f
	}
	f.Status = Warn
	f.Remedy = "start irqbalance (systemctl enable --now irqbalance) or spread the NIC's IRQs over the CPUs of its NUMA node (e.g. set_irq_affinity_cpulist.sh)"
	return f
}

// irqCPUs prefers the effective affinity (what the kernel applies) over the
// requested one.
func irqCPUs(h *host, irq int) []int {
	for _, name := range []string{"effective_affinity_list", "smp_affinity_list"} {
		b, err := os.ReadFile(h.procPath("irq", strconv.Itoa(irq), name))
		if err != nil {
			continue
		}
		if cpus, err := rdmasys.ParseCPUList(strings.TrimSpace(string(b))); err == nil && len(cpus) > 0 {
			return cpus
		}
	}
	return nil
}

// fmtCPUs prints a sorted CPU list back in the kernel's range form.
func fmtCPUs(cpus []int) string { return strings.Join(intlist.Ranges(cpus), ",") }

// findProcess returns the pid of a process with the given comm, or "".
func findProcess(procRoot, comm string) string {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(b)) == comm {
			return e.Name()
		}
	}
	return ""
}

// shmMin is the /dev/shm size NCCL's documentation gives containers
// (--shm-size=1g); with docker's default 64 MiB the SHM transport fails with
// "Bus error" or "unhandled system error" once a few GPUs share the node.
const shmMin = 1 << 30

// checkShm reads the size of the /dev/shm tmpfs from <proc>/self/mounts
// (size=NNNk); a tmpfs mounted without size= gets half of memory.
func checkShm(h *host) []Finding {
	src := h.procPath("self", "mounts")
	f := Finding{Check: "host.shm", Subject: "/dev/shm", Source: src}
	b, err := os.ReadFile(src)
	if err != nil {
		f.Status, f.Value = Skip, "read mounts: "+err.Error()
		return []Finding{f}
	}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 || fields[1] != "/dev/shm" {
			continue
		}
		size := int64(-1)
		for _, o := range strings.Split(fields[3], ",") {
			if v, ok := strings.CutPrefix(o, "size="); ok {
				size = parseTmpfsSize(v)
			}
		}
		switch {
		case size < 0:
			f.Status, f.Value = Pass, fields[2]+", default size (half of memory)"
		case size < shmMin:
			f.Status, f.Value = Warn, fields[2]+", "+fmtLimit(uint64(size))+": too small for NCCL's shared-memory transport"
			f.Remedy = "give the container more: docker run --shm-size=16g (or --ipc=host); Kubernetes: an emptyDir with medium: Memory at /dev/shm"
		default:
			f.Status, f.Value = Pass, fields[2]+", "+fmtLimit(uint64(size))
		}
		return []Finding{f}
	}
	f.Status, f.Value = Skip, "/dev/shm is not a mount point here"
	return []Finding{f}
}

// parseTmpfsSize reads "65536k", "1g", "512m" or bytes; -1 when unreadable
// (a percentage: the default-sized case is as good a guess as any).
func parseTmpfsSize(v string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(v, "k"):
		mult, v = 1<<10, strings.TrimSuffix(v, "k")
	case strings.HasSuffix(v, "m"):
		mult, v = 1<<20, strings.TrimSuffix(v, "m")
	case strings.HasSuffix(v, "g"):
		mult, v = 1<<30, strings.TrimSuffix(v, "g")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1
	}
	return n * mult
}
