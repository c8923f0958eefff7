// Package paste reads the text outputs operators save into a directory and
// fills ethside's model from them.
//
// The directory holds one file per command and interface, named
// KIND.IFACE.txt (IFACE may itself hold dots, "eth0.100"):
//
//	ethtool      ethtool IF
//	ethtool-S    ethtool -S IF
//	ethtool-m    ethtool -m IF
//	ethtool-fec  ethtool --show-fec IF
//	ethtool-g    ethtool -g IF
//	ethtool-c    ethtool -c IF
//	ethtool-l    ethtool -l IF
//	ethtool-a    ethtool -a IF
//	dcb-pfc      dcb pfc show dev IF
//	dcb-app      dcb app show dev IF
//	mlnx_qos     mlnx_qos -i IF
//	hw_counters  grep . /sys/class/infiniband/DEV/ports/1/hw_counters/*
//	             (name:value lines), or rdma statistic show link DEV/1
//	sensors      sensors (the mlx5-pci-* chip gives the HCA temperature)
//
// Other files (PROVENANCE, README, notes.txt) are ignored. Each file is
// read up to MaxFileBytes; a longer one is parsed up to there and says so
// in Problems. A file that cannot be read or parsed adds one line to its
// interface's Problems naming the file (and the line); the reader never
// panics, whatever the input.
//
// Counters: ethtool -S and hw_counters fill one Counters, whose Source
// names both files ("ethtool-S.eth2.txt+hw_counters.eth2.txt"). A
// hw_counters name that ethtool -S already gave is kept as "hw:"+name, so
// neither reading hides the other. DCB: dcb-app, dcb-pfc and mlnx_qos fill
// one DCB; a field the first file (by name) set is not overwritten. A DSCP
// that dcb app maps twice ("CS3:2 CS3:3") keeps the last priority printed.
//
// Optical power: ethtool prints "0.0000 mW / -inf dBm" for a dark lane;
// that is kept as FloorDBm (-40 dBm, the 0.1 µW step of the SFF
// diagnostics), so values stay finite (JSON) and below every threshold.
package paste

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// MaxFileBytes bounds what is read of one file: a paste larger than this
// is not an ethtool output.
const MaxFileBytes = 4 << 20

// Dir is a directory of pastes; it is an ethside.Reader that gives the
// same interfaces at each call.
type Dir string

// Read reads the directory; see Read.
func (d Dir) Read() ([]ethside.Iface, error) { return Read(string(d)) }

var _ ethside.Reader = Dir("")

// Read parses every KIND.IFACE.txt file of dir into interfaces sorted by
// name. Its error, one line naming dir, comes only when dir cannot be read
// or holds no file of a known KIND; what a file lacks is in Problems.
func Read(dir string) ([]ethside.Iface, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("paste directory %s: %w", dir, cause(err))
	}
	byName := map[string]*ethside.Iface{}
	known := 0
	for _, e := range entries {
		kindName, iface, ok := splitName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		it := byName[iface]
		if it == nil {
			it = &ethside.Iface{Name: iface}
			byName[iface] = it
		}
		kind, ok := kindByName[kindName]
		if !ok {
			it.Problems = append(it.Problems, fmt.Sprintf("%s: unknown kind %q (known: %s)", e.Name(), kindName, kindList()))
			continue
		}
		known++
		readOne(filepath.Join(dir, e.Name()), e.Name(), kind, it)
	}
	if known == 0 {
		return nil, fmt.Errorf("paste directory %s: no KIND.IFACE.txt file (kinds: %s)", dir, kindList())
	}
	out := make([]ethside.Iface, 0, len(byName))
	for _, it := range byName {
		out = append(out, *it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// splitName splits "ethtool-S.eth0.100.txt" into "ethtool-S", "eth0.100".
func splitName(name string) (kind, iface string, ok bool) {
	base, found := strings.CutSuffix(name, ".txt")
	if !found {
		return "", "", false
	}
	kind, iface, found = strings.Cut(base, ".")
	if !found || kind == "" || iface == "" {
		return "", "", false
	}
	return kind, iface, true
}

// readOne reads one file, bounded, and parses it into it; what goes wrong
// becomes one line of it.Problems.
func readOne(path, source string, kind Kind, it *ethside.Iface) {
	text, truncated, err := readBounded(path)
	if err != nil {
		it.Problems = append(it.Problems, fmt.Sprintf("%s: %v", source, cause(err)))
		return
	}
	perr := Parse(kind, text, source, it)
	switch {
	case perr != nil && truncated:
		it.Problems = append(it.Problems, fmt.Sprintf("%s: %v (and only its first %d bytes were read)", source, perr, MaxFileBytes))
	case perr != nil:
		it.Problems = append(it.Problems, fmt.Sprintf("%s: %v", source, perr))
	case truncated:
		it.Problems = append(it.Problems, fmt.Sprintf("%s: longer than %d bytes; only the start was read", source, MaxFileBytes))
	}
}

func readBounded(path string) (string, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return "", false, err
	}
	if len(b) > MaxFileBytes {
		return string(b[:MaxFileBytes]), true, nil
	}
	return string(b), false, nil
}

// cause drops the path an os error repeats, which the caller names.
func cause(err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}
