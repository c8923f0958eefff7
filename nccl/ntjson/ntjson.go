// Package ntjson writes a run as nccl-tests 2.19.6 writes its -J FILE.json
// (its JSON file version 3): the same field names, nesting and value
// types, so nccl-tests' tools/analyze_perf_json.py and scripts written
// for nccl-tests read ncclbench's file unchanged. The layout follows
// nccl-tests' src/util.cu; ncclbench's own --json (results.NCCLRun) is a
// different document.
package ntjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rdmabench/rdmabench/results"
)

// FileVersion is nccl-tests' JSON_FILE_VERSION for 2.19.6.
const FileVersion = 3

// timeLayout is nccl-tests' TIME_STRING_FORMAT (%Y-%m-%d %H:%M:%S), local time.
const timeLayout = "2006-01-02 15:04:05"

// Bool is written as nccl-tests' jsonBool writes it: the string "true" or
// "false", not a JSON boolean.
type Bool bool

func (b Bool) MarshalJSON() ([]byte, error) { return json.Marshal(strconv.FormatBool(bool(b))) }

func (b *Bool) UnmarshalJSON(d []byte) error {
	var s string
	if err := json.Unmarshal(d, &s); err != nil {
		return err
	}
	*b = s == "true"
	return nil
}

// Float is written as nccl-tests' jsonDouble writes it: printf's %lf (six
// decimals); NaN (and, to stay JSON, infinities) as a string.
type Float float64

func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"nan"`), nil
	case math.IsInf(v, 0):
		return json.Marshal(strconv.FormatFloat(v, 'f', -1, 64))
	}
	return []byte(strconv.FormatFloat(v, 'f', 6, 64)), nil
}

// Doc is the whole file, in nccl-tests' order.
type Doc struct {
	Version     int      `json:"version"`
	StartTime   string   `json:"start_time"`
	Args        []string `json:"args"`
	Env         []string `json:"env"`
	NCCLVersion int      `json:"nccl_version"` // NCCL's version code, e.g. 22901
	Config      Config   `json:"config"`
	Results     []Result `json:"results"`
	OutOfBounds struct {
		Count int  `json:"count"`
		Okay  Bool `json:"okay"`
	} `json:"out_of_bounds"`
	AverageBusBandwidth struct {
		Bandwidth Float `json:"bandwidth"`
		// Okay is "unchecked" without a minimum to check against
		// (nccl-tests' NCCL_TESTS_MIN_BW), else "true" or "false".
		Okay string `json:"okay"`
	} `json:"average_bus_bandwidth"`
	Errors  []string `json:"errors"`
	EndTime string   `json:"end_time"`
}

// Config is nccl-tests' "config" object; exactly one of StepFactor and
// StepBytes is set.
type Config struct {
	NThreads             int      `json:"nthreads"`
	NGpus                int      `json:"ngpus"`
	MinimumBytes         int      `json:"minimum_bytes"`
	MaximumBytes         int      `json:"maximum_bytes"`
	StepFactor           *int     `json:"step_factor,omitempty"`
	StepBytes            *int     `json:"step_bytes,omitempty"`
	WarmupIters          int      `json:"warmup_iters"`
	Iterations           int      `json:"iterations"`
	AggregatedIterations int      `json:"aggregated_iterations"`
	Validation           int      `json:"validation"`
	Graph                int      `json:"graph"`
	BlockingCollectives  Bool     `json:"blocking_collectives"`
	PerIterTiming        Bool     `json:"per_iter_timing"`
	PerIterSkip          int      `json:"per_iter_skip"`
	ParallelInit         Bool     `json:"parallel_init"`
	Devices              []Device `json:"devices"`
}

// Device is one "# Using devices" line.
type Device struct {
	Rank       int    `json:"rank"`
	Group      int    `json:"group"`
	Pid        int    `json:"pid"`
	Hostname   string `json:"hostname"`
	Device     int    `json:"device"`
	DeviceHex  string `json:"device_hex"` // PCI domain:bus:device, "0000:07:00"
	DeviceInfo string `json:"device_info"`
}

// Result is one table row.
type Result struct {
	Size              int      `json:"size"`
	Count             int      `json:"count"`
	Type              string   `json:"type"`
	Redop             string   `json:"redop"`
	Root              string   `json:"root"` // printf "%6i", as nccl-tests writes it
	OutOfPlace        *Half    `json:"out_of_place"`
	OutOfPlacePerIter *PerIter `json:"out_of_place_per_iter,omitempty"`
	InPlace           *Half    `json:"in_place"`
	InPlacePerIter    *PerIter `json:"in_place_per_iter,omitempty"`
	ActualIterations  int      `json:"actual_iterations"`
	ExperimentName    string   `json:"experiment_name"`
}

// Half is one of a row's two measurements. NWrong is null when the half
// was not checked. With CPUTime (-C 1) the time is the CPU time and its
// key "cpu_time", as nccl-tests writes it.
type Half struct {
	Time    Float  `json:"time"`
	AlgBW   Float  `json:"alg_bw"`
	BusBW   Float  `json:"bus_bw"`
	NWrong  *Float `json:"nwrong"`
	CPUTime bool   `json:"-"`
}

// MarshalJSON writes nccl-tests' keys, in its order.
func (h Half) MarshalJSON() ([]byte, error) {
	type plain Half
	b, err := json.Marshal(plain(h))
	if err != nil || !h.CPUTime {
		return b, err
	}
	return append([]byte(`{"cpu_time"`), bytes.TrimPrefix(b, []byte(`{"time"`))...), nil
}

// UnmarshalJSON reads either key.
func (h *Half) UnmarshalJSON(b []byte) error {
	type plain Half
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var cpu struct {
		CPUTime *Float `json:"cpu_time"`
	}
	if err := json.Unmarshal(b, &cpu); err != nil {
		return err
	}
	if cpu.CPUTime != nil {
		p.Time, p.CPUTime = *cpu.CPUTime, true
	}
	*h = Half(p)
	return nil
}

// PerIter is -I 1's object for one half.
type PerIter struct {
	SkippedIterations int       `json:"skipped_iterations"`
	MinUs             Float     `json:"min_us"`
	MaxUs             Float     `json:"max_us"`
	AvgUs             Float     `json:"avg_us"`
	P50Us             Float     `json:"p50_us"`
	P95Us             Float     `json:"p95_us"`
	P99Us             Float     `json:"p99_us"`
	StdevUs           Float     `json:"stdev_us"`
	CVPct             Float     `json:"cv_pct"`
	TimesUs           []Float   `json:"times_us"`
	PerProcessUs      [][]Float `json:"per_process_max_times_us,omitempty"`
}

// Meta is what the file holds beyond the run itself.
type Meta struct {
	Args        []string  // the command line
	Env         []string  // the environment, KEY=VALUE (secrets are redacted)
	Start, End  time.Time // local time is written
	NCCLVersion int       // version code
	PerIter     bool      // -I 1
	Skip        int       // -K
}

// Build converts a run into nccl-tests' layout.
func Build(r *results.NCCLRun, m Meta) *Doc {
	c := r.Config
	d := &Doc{Version: FileVersion, StartTime: m.Start.Format(timeLayout), EndTime: m.End.Format(timeLayout),
		Args: nonNil(m.Args), Env: Redact(m.Env), NCCLVersion: m.NCCLVersion}
	d.Config = Config{NThreads: c.NThreads, NGpus: c.NGpus, MinimumBytes: c.MinBytes, MaximumBytes: c.MaxBytes,
		WarmupIters: c.Warmup, Iterations: c.Iters, AggregatedIterations: c.AggIters, Validation: c.Check, Graph: c.Graphs,
		BlockingCollectives: c.Blocking != 0, PerIterTiming: Bool(m.PerIter), PerIterSkip: m.Skip, Devices: []Device{}}
	if c.StepFactor > 1 {
		f := c.StepFactor
		d.Config.StepFactor = &f
	} else {
		b := c.StepBytes
		d.Config.StepBytes = &b
	}
	for _, dv := range r.Devices {
		d.Config.Devices = append(d.Config.Devices, Device{Rank: dv.Rank, Group: dv.Group, Pid: dv.Pid, Hostname: dv.Host,
			Device: dv.Device, DeviceHex: pciHex(dv.BusID), DeviceInfo: dv.Name})
	}
	d.Results = []Result{}
	for _, p := range r.Results {
		d.Results = append(d.Results, Result{Size: p.Size, Count: p.Count, Type: p.Type, Redop: p.Redop, Root: fmt.Sprintf("%6d", p.Root),
			OutOfPlace: half(p.OutOfPlace), OutOfPlacePerIter: perIter(p.OutOfPlace.PerIter),
			InPlace: half(p.InPlace), InPlacePerIter: perIter(p.InPlace.PerIter),
			ActualIterations: c.Iters})
	}
	d.OutOfBounds.Count, d.OutOfBounds.Okay = r.OutOfBounds, r.OutOfBounds == 0
	d.AverageBusBandwidth.Bandwidth, d.AverageBusBandwidth.Okay = Float(r.AvgBusBW), "unchecked"
	if r.MinBusBW != nil {
		d.AverageBusBandwidth.Okay = strconv.FormatBool(r.MinBusBW.Okay)
	}
	d.Errors = []string{}
	if r.Error != "" {
		d.Errors = append(d.Errors, r.Error)
	}
	return d
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func half(x results.NCCLResult) *Half {
	h := &Half{Time: Float(x.TimeUs), AlgBW: Float(x.AlgBW), BusBW: Float(x.BusBW)}
	if x.CPUTimeUs != nil {
		h.Time, h.CPUTime = Float(*x.CPUTimeUs), true
	}
	if x.Checked {
		w := Float(x.Wrong)
		h.NWrong = &w
	}
	return h
}

func floats(v []float64) []Float {
	out := make([]Float, len(v))
	for i, x := range v {
		out[i] = Float(x)
	}
	return out
}

func perIter(p *results.NCCLPerIter) *PerIter {
	if p == nil {
		return nil
	}
	q := &PerIter{SkippedIterations: p.Skipped, MinUs: Float(p.MinUs), MaxUs: Float(p.MaxUs), AvgUs: Float(p.AvgUs),
		P50Us: Float(p.P50Us), P95Us: Float(p.P95Us), P99Us: Float(p.P99Us), StdevUs: Float(p.StdevUs), CVPct: Float(p.CVPct),
		TimesUs: floats(p.TimesUs)}
	for _, row := range p.PerProcessUs {
		q.PerProcessUs = append(q.PerProcessUs, floats(row))
	}
	return q
}

// pciHex is nccl-tests' [%04x:%02x:%02x] from cudaDeviceGetPCIBusId's
// "0000:07:00.0" (the function number dropped).
func pciHex(busID string) string {
	if i := strings.LastIndexByte(busID, '.'); i > 0 {
		busID = busID[:i]
	}
	return strings.ToLower(busID)
}

// secretName matches the environment variables whose values stay out of
// the file (nccl-tests copies the whole environment): job tokens such as
// NCCL_BENCH_TOKEN, and anything named like a secret.
var secretName = regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSW|CREDENTIAL|_KEY$|^KEY$|AUTH)`)

// Redact copies env with secret values replaced by "<redacted>".
func Redact(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if ok && secretName.MatchString(k) {
			kv = k + "=<redacted>"
		}
		out = append(out, kv)
	}
	return out
}

// Write writes d as one line of JSON, as nccl-tests does.
func Write(w io.Writer, d *Doc) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // "<redacted>" as it reads
	return enc.Encode(d)
}

// maxProbes bounds the search for a free name.
const maxProbes = 1000

// Create opens a new file at path for the document without replacing
// anything: like nccl-tests, an existing path makes it try path.0,
// path.1, ... It returns the file and the name it got.
func Create(path string) (*os.File, string, error) {
	try := path
	for i := 0; i <= maxProbes; i++ {
		f, err := os.OpenFile(try, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			return f, try, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, "", fmt.Errorf("-J %s: %w", path, err)
		}
		try = path + "." + strconv.Itoa(i)
	}
	return nil, "", fmt.Errorf("-J %s: it and %s.0 to .%d all exist", path, filepath.Base(path), maxProbes-1)
}

// IsJSONName says whether -J's file is JSON by its suffix, as nccl-tests
// decides (the only type it writes).
func IsJSONName(path string) bool {
	return strings.EqualFold(filepath.Ext(path), ".json")
}
