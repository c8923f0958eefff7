package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
)

// Generated fixtures of analyze's bad-input rows (testdata/badinput/analyze.txt).
func init() {
	ncclogTestdata := func(name string) ([]byte, error) {
		return os.ReadFile(filepath.Join("..", "..", "ncclog", "testdata", name))
	}
	// An ELF header: binary data, NUL bytes in it.
	badInputFixtures["an-binary.bin"] = func(path string) error {
		return os.WriteFile(path, append([]byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00"), bytes.Repeat([]byte{0, 0x3e, 0}, 100)...), 0o644)
	}
	// A real TCP-fallback log, gzip-compressed: read as it is.
	badInputFixtures["an-fallback.log.gz"] = func(path string) error {
		data, err := ncclogTestdata("nccl-2.19-socket-fallback.log")
		if err != nil {
			return err
		}
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(data)
		if err := zw.Close(); err != nil {
			return err
		}
		return os.WriteFile(path, b.Bytes(), 0o644)
	}
	// A 5 MiB line of application output before a clean IB log: skipped
	// and counted (it aborted the analysis at 4 MiB).
	badInputFixtures["an-5mib-line.log"] = func(path string) error {
		data, err := ncclogTestdata("nccl-2.30-ib-gdr.log")
		if err != nil {
			return err
		}
		long := append(bytes.Repeat([]byte("x"), 5<<20), '\n')
		return os.WriteFile(path, append(long, data...), 0o644)
	}
	// zstd's magic number: not read here, and said so.
	badInputFixtures["an-log.zst"] = func(path string) error {
		return os.WriteFile(path, []byte("\x28\xb5\x2f\xfd\x00\x58\x61\x00\x00"), 0o644)
	}
}
