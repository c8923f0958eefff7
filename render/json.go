package render

import (
	"encoding/json"
	"io"

	"github.com/rdmabench/rdmabench/results"
)

// JSON writes the run as one indented JSON document with the current schema
// version: what --json prints and --save keeps.
func JSON(w io.Writer, r *results.Run) error {
	out := *r
	out.Schema = results.Schema
	if out.Results == nil {
		out.Results = []results.Result{}
	}
	return indented(w, out)
}

// indented writes v as one indented JSON document: every document we
// write looks alike.
func indented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// NCCLJSON writes an ncclbench run as one indented JSON document: what
// ncclbench --json prints and --save keeps.
func NCCLJSON(w io.Writer, r *results.NCCLRun) error {
	return indented(w, r)
}
