// Package fleet compares many hosts' `rdmabench doctor --json` reports and
// names the hosts that are not like the others: for every fact (firmware,
// rates, MTUs, GID indexes, NCCL environment, drivers, sysctls) the majority
// value and the hosts that differ, plus each host's FAIL and WARN counts.
package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rdmabench/rdmabench/doctor"
	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/saved"
)

// maxReportBytes bounds one report file: doctor writes tens of KiB.
const maxReportBytes = 16 << 20

// Host is one node's report.
type Host struct {
	Name    string
	File    string
	Facts   doctor.Facts
	Summary doctor.Summary
}

// Load reads reports from files and directories (every *.json, and
// *.json.NODE as rpdcp names them, in a directory). Two reports of one host, a file that is not doctor JSON, or
// no reports at all are errors.
func Load(paths []string) ([]Host, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		// *.json, and rpdcp's doctor.json.NODE
		var m []string
		for _, pattern := range []string{"*.json", "*.json.*"} {
			g, err := filepath.Glob(filepath.Join(p, pattern))
			if err != nil {
				return nil, err
			}
			m = append(m, g...)
		}
		slices.Sort(m)
		files = append(files, m...)
	}
	if len(files) == 0 {
		return nil, errors.New("no doctor reports (*.json) found")
	}
	var hosts []Host
	seen := map[string]string{}
	for _, f := range files {
		h, err := loadFile(f)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[h.Name]; dup {
			return nil, fmt.Errorf("host %s has two reports: %s and %s", h.Name, prev, f)
		}
		seen[h.Name] = f
		hosts = append(hosts, h)
	}
	slices.SortFunc(hosts, func(a, b Host) int { return strings.Compare(a.Name, b.Name) })
	return hosts, nil
}

func loadFile(path string) (Host, error) {
	f, err := os.Open(path)
	if err != nil {
		return Host{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxReportBytes+1))
	if err != nil {
		return Host{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxReportBytes {
		return Host{}, fmt.Errorf("%s: larger than %d MiB, not a doctor report", path, maxReportBytes>>20)
	}
	// Another kind of rdmabench document is named as what it is: its
	// schema number says nothing of a doctor report's.
	if k, err := saved.Detect(b); err == nil && k != saved.Doctor && k != saved.Hgrm {
		return Host{}, fmt.Errorf("%s is %s; fleet reads doctor --json reports", path, kindPhrase[k])
	}
	var doc doctor.JSONReport
	if err := json.Unmarshal(b, &doc); err != nil {
		return Host{}, fmt.Errorf("%s: not rdmabench doctor --json output: %v", path, err)
	}
	switch {
	case doc.Schema == 0:
		return Host{}, fmt.Errorf("%s: a JSON document that is not a doctor report (rdmabench doctor --json)", path)
	case doc.Schema != doctor.Schema:
		return Host{}, fmt.Errorf("%s: doctor report schema %d, this fleet reads %d", path, doc.Schema, doctor.Schema)
	case doc.Host == nil:
		return Host{}, fmt.Errorf("%s: no host facts (written by an older rdmabench doctor?)", path)
	}
	name := doc.Host.Hostname
	if name == "" { // a tree captured without its hostname: the file names it
		name = strings.Replace(filepath.Base(path), ".json", "", 1)
	}
	return Host{Name: name, File: path, Facts: *doc.Host, Summary: doc.Summary}, nil
}

// kindPhrase names each kind of document fleet does not read, and what
// wrote it.
var kindPhrase = map[saved.Kind]string{
	saved.Run:         "a run document (rdmabench write-bw ... --save or --json)",
	saved.Mesh:        "a mesh document (rdmabench mesh --save)",
	saved.NCCL:        "an ncclbench run (ncclbench --save or --json)",
	saved.Compare:     "a compare document (rdmabench compare --json)",
	saved.CompareMesh: "a mesh compare document (rdmabench compare --json of two meshes)",
	saved.Health:      "a health document (rdmabench health --json)",
}

// absent is the value of a fact a host does not have (a missing HCA, an
// unset variable).
const absent = "(absent)"

// flatten turns a host's facts into fact → value. Keys read like paths:
// "hca/mlx5_3/fw", "port/mlx5_3:1/rate", "nccl_env/NCCL_IB_HCA".
func flatten(f doctor.Facts) map[string]string {
	m := map[string]string{
		"kernel":     f.Kernel,
		"rdma_core":  f.RDMACore,
		"gpu_driver": f.GPUDriver,
		"peermem":    map[bool]string{true: "loaded", false: "not loaded"}[f.Peermem],
	}
	for k, v := range f.Drivers {
		m["driver/"+k] = v
	}
	for k, v := range f.NCCLEnv {
		m["nccl_env/"+k] = v
	}
	for k, v := range f.Sysctls {
		m["sysctl/"+k] = v
	}
	for _, h := range f.HCAs {
		m["hca/"+h.Name+"/fw"] = h.FW
		m["hca/"+h.Name+"/psid"] = h.PSID
		for _, p := range h.Ports {
			pre := fmt.Sprintf("port/%s:%d/", h.Name, p.Port)
			m[pre+"state"] = string(p.State)
			m[pre+"rate"] = p.Rate
			if p.MTU > 0 {
				m[pre+"mtu"] = strconv.Itoa(p.MTU)
			}
			if p.GIDIndex != nil {
				m[pre+"gid_index"] = strconv.Itoa(*p.GIDIndex)
			}
		}
	}
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	return m
}

// matters says whether a host that differs on a fact fails the fleet:
// firmware, drivers, link state, rate, MTU, GID index, the NCCL environment
// and GPUDirect RDMA do; the kernel build, PSID and sysctls are shown only.
func matters(fact string) bool {
	for _, pre := range []string{"nccl_env/", "driver/", "rdma_core", "gpu_driver", "peermem"} {
		if strings.HasPrefix(fact, pre) {
			return true
		}
	}
	for _, suf := range []string{"/fw", "/state", "/rate", "/mtu", "/gid_index"} {
		if strings.HasPrefix(fact, "hca/") || strings.HasPrefix(fact, "port/") {
			if strings.HasSuffix(fact, suf) {
				return true
			}
		}
	}
	return false
}

// Fact is one fact across the fleet.
type Fact struct {
	Fact     string      `json:"fact"`
	Majority string      `json:"majority"`
	Count    int         `json:"count"` // hosts with the majority value
	Matters  bool        `json:"matters"`
	Differ   []HostValue `json:"differ"` // hosts with another value, by host name
}

// HostValue is a host's value of a fact.
type HostValue struct {
	Host  string `json:"host"`
	Value string `json:"value"`
}

// HostLine is one host's summary.
type HostLine struct {
	Host   string   `json:"host"`
	File   string   `json:"file"`
	Fail   int      `json:"fail"`
	Warn   int      `json:"warn"`
	Differ []string `json:"differ"` // facts where it is not the majority
}

// Result is the comparison.
type Result struct {
	Hosts []HostLine `json:"hosts"`
	Facts []Fact     `json:"facts"`
	// Version is the rdmabench that wrote the document.
	Version *version.Info `json:"version,omitempty"`
}

// Compare finds, for every fact any host has, the majority value (ties go
// to the smaller value, so the output is stable) and the hosts that differ.
func Compare(hosts []Host) *Result {
	flat := make([]map[string]string, len(hosts))
	keys := map[string]bool{}
	for i, h := range hosts {
		flat[i] = flatten(h.Facts)
		for k := range flat[i] {
			keys[k] = true
		}
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	r := &Result{}
	differ := make([][]string, len(hosts))
	for _, k := range names {
		count := map[string]int{}
		for _, m := range flat {
			count[valueOr(m, k)]++
		}
		fact := Fact{Fact: k, Matters: matters(k), Differ: []HostValue{}}
		for v, n := range count {
			if n > fact.Count || (n == fact.Count && v < fact.Majority) {
				fact.Majority, fact.Count = v, n
			}
		}
		for i, m := range flat {
			if v := valueOr(m, k); v != fact.Majority {
				fact.Differ = append(fact.Differ, HostValue{Host: hosts[i].Name, Value: v})
				differ[i] = append(differ[i], k)
			}
		}
		r.Facts = append(r.Facts, fact)
	}
	for i, h := range hosts {
		d := differ[i]
		if d == nil {
			d = []string{}
		}
		r.Hosts = append(r.Hosts, HostLine{Host: h.Name, File: h.File, Fail: h.Summary.Fail, Warn: h.Summary.Warn, Differ: d})
	}
	return r
}

func valueOr(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return absent
}

// Failed reports whether a host differs on a fact that matters or has a
// FAIL of its own: what makes `rdmabench fleet` exit 1.
func (r *Result) Failed() bool {
	for _, f := range r.Facts {
		if f.Matters && len(f.Differ) > 0 {
			return true
		}
	}
	for _, h := range r.Hosts {
		if h.Fail > 0 {
			return true
		}
	}
	return false
}

// WriteText prints the facts that differ (those that matter marked "!"),
// then those every host shares, then one line per host.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d hosts\n\nfacts that differ (! = matters):\n", len(r.Hosts))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	differ := 0
	for _, f := range r.Facts {
		if len(f.Differ) == 0 {
			continue
		}
		differ++
		mark := " "
		if f.Matters {
			mark = "!"
		}
		var others []string
		for _, d := range f.Differ {
			others = append(others, d.Host+"="+d.Value)
		}
		tie := ""
		if 2*f.Count <= len(r.Hosts) {
			tie = ", no majority"
		}
		fmt.Fprintf(tw, "%s %s\t%s (%d of %d%s)\t%s\n", mark, f.Fact, f.Majority, f.Count, len(r.Hosts), tie, strings.Join(others, ", "))
	}
	if differ == 0 {
		fmt.Fprintf(tw, "  none\n")
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nfacts every host shares:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, f := range r.Facts {
		if len(f.Differ) == 0 {
			fmt.Fprintf(tw, "  %s\t%s\n", f.Fact, f.Majority)
		}
	}
	tw.Flush()
	fmt.Fprintf(&b, "\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "HOST\tFAIL\tWARN\tDIFFERS ON\n")
	for _, h := range r.Hosts {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", h.Host, h.Fail, h.Warn, orDash(strings.Join(h.Differ, ", ")))
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteJSON prints {"schema":1,"hosts":[...],"facts":[...],"failed":bool}.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Schema int `json:"schema"`
		*Result
		Failed bool `json:"failed"`
	}{1, r, r.Failed()})
}
