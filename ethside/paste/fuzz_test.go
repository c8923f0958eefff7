package paste

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmabench/rdmabench/ethside"
)

// FuzzParse feeds any text to every parser: none may panic, and a
// parser's part, when set, names its source.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"healthy", "lossy", "darklanes", "rdmastat"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.txt"))
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			kind, _, _ := splitName(filepath.Base(p))
			f.Add(uint8(kindByName[kind]), string(b))
		}
	}
	f.Add(uint8(KindDCBPFC), "prio-pfc 0:off 3:on 9:on x:y")
	f.Add(uint8(KindDCBApp), "dscp-prio CS3:3 26:3 0x40:1 :\napptrust: dscp")
	f.Add(uint8(KindHWCounters), "link mlx5_0/1 out_of_buffer 5 np_cnp_sent\n7 x\nrx: 1\n/a/b:\n")
	f.Add(uint8(KindSensors), "mlx5-pci-0100\nAdapter: PCI adapter\nasic: +1e999°C (crit = +-.°C)\n")
	f.Add(uint8(KindCoalesce), "Adaptive RX: on TX:\nrx-usecs: -1\n")
	f.Fuzz(func(t *testing.T, k uint8, text string) {
		var it ethside.Iface
		_ = Parse(Kind(int(k)%int(kindCount+1)), text, "src", &it)
		if it.Module != nil && it.Module.Source != "src" {
			t.Fatalf("module source %q", it.Module.Source)
		}
	})
}
