package doctor

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/rdmasys"
)

// driverModules are the modules whose version a fleet should agree on.
var driverModules = []string{"mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs"}

// collectFacts reads the host facts; nothing here fails a run.
func collectFacts(h *host) *Facts {
	f := &Facts{
		Hostname: readTrimmed(h.procPath("sys", "kernel", "hostname")),
		Kernel:   readTrimmed(h.procPath("sys", "kernel", "osrelease")),
		RDMACore: h.opts.RDMACoreVersion,
		Drivers:  map[string]string{},
		NCCLEnv:  map[string]string{},
		Sysctls:  map[string]string{},
		Tool:     h.opts.ToolVersion,
	}
	if h.opts.Now != nil {
		f.Time = h.opts.Now().UTC().Format("2006-01-02T15:04:05Z")
	}
	if h.opts.Capture {
		f.Capture = true
		f.NotFromCapture = captureProvenance(f)
	}
	for _, m := range driverModules {
		if v := readTrimmed(h.sysPath("module", m, "version")); v != "" {
			f.Drivers[m] = v
		}
	}
	f.GPUDriver = readTrimmed(h.sysPath("module", "nvidia", "version"))
	f.Peermem = rdmasys.ModuleLoaded(h.opts.SysRoot, "nvidia_peermem") || rdmasys.ModuleLoaded(h.opts.SysRoot, "nv_peer_mem")
	for k, v := range h.opts.Env {
		if strings.HasPrefix(k, "NCCL_") {
			f.NCCLEnv[k] = v
		}
	}
	for _, r := range sysctlRules {
		if v, err := h.readSysctl(r.key); err == nil {
			f.Sysctls[r.key] = v
		}
	}
	for i := range h.devs {
		d := &h.devs[i]
		hf := HCAFacts{Name: d.Name, Model: d.HCAType, FW: d.FWVer, PSID: d.BoardID}
		for _, p := range h.ports() {
			if p.dev == d {
				hf.Ports = append(hf.Ports, portFacts(h, p))
			}
		}
		f.HCAs = append(f.HCAs, hf)
	}
	return f
}

func portFacts(h *host, p portRef) PortFacts {
	pf := PortFacts{Port: p.port.Number, State: p.port.State, LinkLayer: p.port.LinkLayer,
		Rate: p.port.RateText, RateGbps: p.port.RateGbps, Used: h.inScope(p)}
	if h.opts.Querier != nil {
		if active, _, err := h.opts.Querier.PortMTU(p.dev.Name, p.port.Number); err == nil {
			pf.MTU = active
		}
	}
	if !p.port.IsRoCE() {
		return pf
	}
	if pf.MTU == 0 {
		if nd, err := rdmasys.ReadNetdev(h.opts.SysRoot, portNetdev(p.port)); err == nil {
			pf.MTU = roceMTU(nd.MTU)
		}
	}
	// The index NCCL uses: the one set, else the one it picks itself.
	if v, ok := h.env("NCCL_IB_GID_INDEX"); ok && v != "-1" {
		if n, err := strconv.Atoi(v); err == nil {
			pf.GIDIndex = &n
		}
	} else if g, _, err := rdmasys.PickRoCEv2IPv4(p.port.GIDs); err == nil {
		pf.GIDIndex = &g.Index
	}
	return pf
}

// captureProvenance says which facts of a capture's report come from the
// machine that read it: they describe that machine, not the captured host.
func captureProvenance(f *Facts) map[string]string {
	m := map[string]string{
		"nccl_env":     "the environment (and --env-file) of the doctor run, not the captured host's",
		"tool_version": "the rdmabench that read the capture",
	}
	if f.Time != "" {
		m["time"] = "when the capture was read, not when it was taken"
	}
	return m
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// RDMACoreVersion finds the rdma-core release from the libibverbs in the
// given library directories; "" when none is found.
func RDMACoreVersion(libDirs []string) string {
	for _, dir := range libDirs {
		matches, _ := filepath.Glob(filepath.Join(dir, "libibverbs.so.1.*"))
		slices.Sort(matches)
		for i := len(matches) - 1; i >= 0; i-- {
			if v := version.RDMACore(filepath.Base(matches[i])); v != "" {
				return v
			}
		}
	}
	return ""
}
