package rdmasys

import (
	"strings"
	"testing"
)

// FuzzParseCPUList: CPU lists come from sysfs and from --cpus; whatever the
// text, the result is bounded and made of CPUs the text names.
func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-3,8,10-11", "8-11,24", "0", "", " 1 \n", "3-1", "-1", "0-", "0-2000000000", "0-65535,0-65535", "1,,2", "a-b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err != nil {
			return
		}
		if len(cpus) > MaxCPUs {
			t.Fatalf("ParseCPUList(%q): %d CPUs", s, len(cpus))
		}
		for _, c := range cpus {
			if c < 0 || c >= MaxCPUs {
				t.Fatalf("ParseCPUList(%q) holds CPU %d", s, c)
			}
		}
		if len(cpus) == 0 && strings.Trim(strings.TrimSpace(s), ",") != "" {
			t.Fatalf("ParseCPUList(%q) = nothing", s)
		}
	})
}
