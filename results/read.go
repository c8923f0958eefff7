package results

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// maxDocument bounds what Decode reads: a run of 64 sizes × many QP counts
// with intervals is a few MiB; anything far larger is not a result.
const maxDocument = 256 << 20

// Decode reads one result document (--json, --save). Schemas from 1 to
// Schema are read (fields a version lacks stay zero); a newer one is
// refused, since its figures may not mean what ours do.
func Decode(r io.Reader) (*Run, error) {
	var run Run
	dec := json.NewDecoder(io.LimitReader(r, maxDocument))
	if err := dec.Decode(&run); err != nil {
		return nil, fmt.Errorf("not a result document: %w", err)
	}
	switch {
	case run.Schema < 1:
		return nil, fmt.Errorf("not a result document: no schema version (want 1 to %d)", Schema)
	case run.Schema > Schema:
		return nil, fmt.Errorf("schema %d is newer than this rdmabench reads (%d)", run.Schema, Schema)
	case !run.Test.Valid():
		return nil, fmt.Errorf("not a result document: unknown test %q", run.Test)
	}
	return &run, nil
}

// ReadFile reads a result document from a file.
func ReadFile(path string) (*Run, error) { return readFile(path, Decode) }

// readFile decodes a file, its name in front of a decoding error.
func readFile[T any](path string, decode func(io.Reader) (T, error)) (T, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, err
	}
	defer f.Close()
	v, err := decode(f)
	if err != nil {
		return v, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
