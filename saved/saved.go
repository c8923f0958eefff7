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
	Doctor      *results.DoctorDocument
	Health      *results.HealthDocument
}

// Name is the document's name in a report: its file name without the
// extension, as plot names its lines.
func (d *Document) Name() string {
	b := filepath.Base(d.Path)
	return strings.TrimSuffix(b, filepath.Ext(b))
}

// maxFile bounds what Read reads: the largest document, a mesh of 1000
// ranks, is under 1 GiB.
const maxFile int64 = 1 << 30

// sniffBytes is what is read of a file before its kind is known: a file
// of no kind rdmabench reads is refused after this much, however large.
const sniffBytes = 4096

// Kinds says what rdmabench reads, for messages.
const Kinds = "it reads JSON documents of runs, meshes, ncclbench runs, compare, doctor and health, and .hgrm files"

// ErrNotSaved marks a file of no kind rdmabench reads (NotSavedError).
var ErrNotSaved = errors.New("not a saved document")

// NotSavedError is a file of no kind rdmabench reads, told from its first
// bytes. What names it when it is known ("a PNG image"); Ours says it is a
// kind the tools themselves write beside their results (a plot, a report
// page), which a reader given a whole directory may pass over.
type NotSavedError struct {
	What string
	Ours bool
}

func (e *NotSavedError) Error() string {
	if e.What == "" {
		return "a file of no kind rdmabench reads (" + Kinds + ")"
	}
	return e.What + ", not a saved result (" + Kinds + ")"
}

func (e *NotSavedError) Is(target error) bool { return target == ErrNotSaved }

// open opens path for reading and reads its first bytes; errors name the
// file.
func open(path string) (*os.File, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path goes in front, as for every other error
		}
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: a directory, not a saved document (give the files in it: %s)", path, filepath.Join(path, "*"))
	}
	head := make([]byte, sniffBytes)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, head[:n], nil
}

// Peek tells, from a bounded read of its first bytes, whether the file at
// path is of a kind rdmabench reads: nil when it is (its content may
// still be damaged: ReadFile says), a *NotSavedError (ErrNotSaved) when
// it is not; errors name the file.
func Peek(path string) error {
	f, head, err := open(path)
	if err != nil {
		return err
	}
	f.Close()
	if _, err := sniff(head); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// ReadFile reads the document at path; its error names the file. A file
// of no kind it reads is refused after its first bytes (a *NotSavedError).
func ReadFile(path string) (*Document, error) {
	f, head, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := sniff(head); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	data, err := io.ReadAll(io.MultiReader(bytes.NewReader(head), io.LimitReader(f, maxFile+1-int64(len(head)))))
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

// format is what a file's first bytes say it is.
type format int

const (
	jsonFormat format = iota + 1
	hgrmFormat
)

// sniff tells a file's format from its first bytes (up to sniffBytes): a
// JSON object, or an .hgrm file, whose first line that is not blank or a
// "#" comment is HdrHistogram's header "Value Percentile TotalCount
// 1/(1-Percentile)". Anything else is a *NotSavedError.
func sniff(head []byte) (format, error) {
	trimmed := bytes.TrimLeft(head, " \t\r\n")
	if len(trimmed) == 0 {
		return 0, fmt.Errorf("empty: not a saved document")
	}
	lower := bytes.ToLower(trimmed[:min(len(trimmed), 512)])
	switch {
	case trimmed[0] == '{':
		return jsonFormat, nil
	case trimmed[0] == '[':
		return 0, fmt.Errorf("a JSON array: not a saved document (each is one JSON object)")
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return 0, &NotSavedError{What: "a PNG image", Ours: true}
	case bytes.HasPrefix(lower, []byte("<svg")) || bytes.HasPrefix(lower, []byte("<?xml")) && bytes.Contains(lower, []byte("<svg")):
		return 0, &NotSavedError{What: "an SVG image", Ours: true}
	case bytes.HasPrefix(lower, []byte("<!doctype html")) || bytes.HasPrefix(lower, []byte("<html")):
		return 0, &NotSavedError{What: "an HTML page", Ours: true}
	case bytes.IndexByte(head, 0) >= 0:
		return 0, &NotSavedError{What: "a binary file"}
	}
	for _, line := range bytes.Split(trimmed, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) >= 2 && f[0] == "Value" && f[1] == "Percentile" {
			return hgrmFormat, nil
		}
		break
	}
	return 0, &NotSavedError{}
}

// Decode reads one document of any kind.
func Decode(data []byte) (*Document, error) {
	if int64(len(data)) > maxFile {
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
		d.Doctor = &results.DoctorDocument{}
		if err = strict(data, d.Doctor, "doctor document"); err == nil && d.Doctor.Schema != results.DoctorSchema {
			err = fmt.Errorf("doctor schema %d: this rdmabench reads %d", d.Doctor.Schema, results.DoctorSchema)
		}
	case Health:
		d.Health = &results.HealthDocument{}
		if err = strict(data, d.Health, "health document"); err == nil && d.Health.Schema != results.HealthSchema {
			err = fmt.Errorf("health schema %d: this rdmabench reads %d", d.Health.Schema, results.HealthSchema)
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
// fields only that kind has, an .hgrm file by its header line; anything
// else is a *NotSavedError.
func Detect(data []byte) (Kind, error) {
	f, err := sniff(data[:min(len(data), sniffBytes)])
	if err != nil {
		return 0, err
	}
	if f == hgrmFormat {
		return Hgrm, nil
	}
	trimmed := bytes.TrimSpace(data)
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
