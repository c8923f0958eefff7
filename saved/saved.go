// Package saved reads any document rdmabench and ncclbench save, telling
// its kind by its content (its fields), not by its name: a verbs run
// (--save, --json), an .hgrm file, a mesh document, an ncclbench run, a
// compare --json (of runs or of meshes), doctor --json and health --json.
// What reads many kinds at once (rdmabench report) reads them here.
package saved

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdmabench/rdmabench/compare"
	"github.com/rdmabench/rdmabench/doctor"
	"github.com/rdmabench/rdmabench/health"
	"github.com/rdmabench/rdmabench/results"
)

// Kind is the kind of a saved document.
type Kind int

const (
	Run         Kind = iota + 1 // a verbs test's run (results.Run)
	Hgrm                        // an .hgrm percentile distribution
	Mesh                        // a mesh document
	NCCL                        // an ncclbench run
	Compare                     // compare --json of two runs
	CompareMesh                 // compare --json of two meshes
	Doctor                      // doctor --json
	Health                      // health --json
)

var kindNames = map[Kind]string{Run: "run", Hgrm: "hgrm", Mesh: "mesh", NCCL: "ncclbench run",
	Compare: "compare", CompareMesh: "mesh compare", Doctor: "doctor", Health: "health"}

func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Document is one saved file: its kind, and the one field of that kind
// set.
type Document struct {
	Path string
	Kind Kind

	Run         *results.Run
	Hgrm        *results.Hgrm
	Mesh        *results.Mesh
	NCCL        *results.NCCLRun
	Compare     *compare.Report
	CompareMesh *compare.MeshReport
	Doctor      *doctor.JSONReport
	Health      *health.Document
}

// Name is the document's name in a report: its file name without the
// extension, as plot names its lines.
func (d *Document) Name() string {
	b := filepath.Base(d.Path)
	return strings.TrimSuffix(b, filepath.Ext(b))
}

// maxFile bounds what Read reads: the largest document, a mesh of 1000
// ranks, is under 1 GiB.
const maxFile = 1 << 30

// ReadFile reads the document at path; its error names the file.
func ReadFile(path string) (*Document, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path goes in front, as for every other error
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d.Path = path
	return d, nil
}

// Decode reads one document of any kind.
func Decode(data []byte) (*Document, error) {
	if len(data) > maxFile {
		return nil, fmt.Errorf("over %d MiB: not a saved document", maxFile>>20)
	}
	k, err := Detect(data)
	if err != nil {
		return nil, err
	}
	d := &Document{Kind: k}
	switch k {
	case Hgrm:
		d.Hgrm, err = results.ReadHgrm(bytes.NewReader(data))
		if err == nil && len(d.Hgrm.Percentiles) == 0 {
			err = fmt.Errorf("no percentile lines: not an .hgrm file")
		}
	case Run:
		d.Run, err = results.Decode(bytes.NewReader(data))
	case Mesh:
		d.Mesh, err = results.DecodeMesh(bytes.NewReader(data))
	case NCCL:
		d.NCCL, err = results.DecodeNCCL(bytes.NewReader(data))
	case Compare:
		d.Compare = &compare.Report{}
		if err = strict(data, d.Compare, "compare document"); err == nil {
			for _, r := range d.Compare.Rows {
				err = errors.Join(err, checkRow(r))
			}
		}
	case CompareMesh:
		d.CompareMesh = &compare.MeshReport{}
		if err = strict(data, d.CompareMesh, "mesh compare document"); err == nil {
			for _, r := range d.CompareMesh.Rows {
				err = errors.Join(err, checkRow(r.Row))
			}
		}
	case Doctor:
		d.Doctor = &doctor.JSONReport{}
		if err = strict(data, d.Doctor, "doctor document"); err == nil && d.Doctor.Schema != doctor.Schema {
			err = fmt.Errorf("doctor schema %d: this rdmabench reads %d", d.Doctor.Schema, doctor.Schema)
		}
	case Health:
		d.Health = &health.Document{}
		if err = strict(data, d.Health, "health document"); err == nil && d.Health.Schema != health.DocumentSchema {
			err = fmt.Errorf("health schema %d: this rdmabench reads %d", d.Health.Schema, health.DocumentSchema)
		}
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// checkRow refuses a compare row that says it has an interval and gives
// none: the readers show the interval of such a row.
func checkRow(r compare.Row) error {
	if r.NoiseAware && (r.CILowPct == nil || r.CIHighPct == nil) {
		return fmt.Errorf("compare document: row %s at %d B, %d QPs is noise-aware without its interval", r.Metric, r.Size, r.QPs)
	}
	return nil
}

func strict(data []byte, v any, what string) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("not a %s: %w", what, err)
	}
	return nil
}

// Detect tells a document's kind by its content: JSON documents by the
// fields only that kind has, anything else is read as an .hgrm file.
func Detect(data []byte) (Kind, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return 0, fmt.Errorf("empty: not a saved document")
	}
	switch trimmed[0] {
	case '{':
	case '[':
		return 0, fmt.Errorf("a JSON array: not a saved document (each is one JSON object)")
	default:
		return Hgrm, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return 0, fmt.Errorf("not a JSON document: %w", err)
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if _, ok := fields[n]; !ok {
				return false
			}
		}
		return true
	}
	str := func(name string) string {
		var s string
		json.Unmarshal(fields[name], &s)
		return s
	}
	switch {
	case str("kind") == results.MeshKind:
		return Mesh, nil
	case str("tool") == results.NCCLTool:
		return NCCL, nil
	case has("rows", "threshold_pct", "test"):
		return Compare, nil
	case has("rows", "threshold_pct"):
		return CompareMesh, nil
	case has("findings", "summary"):
		return Doctor, nil
	case has("faults", "status", "exit"):
		return Health, nil
	case has("schema", "test", "results"):
		return Run, nil
	}
	return 0, fmt.Errorf("a JSON document of no kind rdmabench reads (not a run, mesh, ncclbench run, compare, doctor or health document)")
}
