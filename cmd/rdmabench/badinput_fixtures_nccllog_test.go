package main

import (
	"bytes"
	"os"
)

// Generated fixtures of doctor --nccl-log's bad-input rows
// (testdata/badinput/nccllog.txt).
func init() {
	badInputFixtures["an-binary.bin"] = func(path string) error {
		return os.WriteFile(path, append([]byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00"), bytes.Repeat([]byte{0, 0x3e, 0}, 100)...), 0o644)
	}
	// A 5 MiB line between NCCL's: it aborted the log's reading at 4 MiB.
	badInputFixtures["an-5mib-line.log"] = func(path string) error {
		var b bytes.Buffer
		b.WriteString("h1:77:77 [0] NCCL INFO NCCL version 2.30.1+cuda12.9\n")
		b.Write(bytes.Repeat([]byte("x"), 5<<20))
		b.WriteString("\nh1:77:90 [0] NCCL INFO Using network IB\n")
		return os.WriteFile(path, b.Bytes(), 0o644)
	}
}
