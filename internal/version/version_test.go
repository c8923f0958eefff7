package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func buildInfo(main string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{Main: debug.Module{Version: main}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

func TestFromBuild(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name    string
		set     string
		bi      *debug.BuildInfo
		want    string
		wantRev string
	}{
		{"tag", "", buildInfo("v1.2.3", "vcs.revision", rev), "1.2.3", rev},
		{"past a tag, dirty", "", buildInfo("v1.2.4-0.20260101120000-0123456789ab+dirty", "vcs.revision", rev, "vcs.modified", "true"),
			"1.2.4-0.20260101120000-0123456789ab-dirty", rev},
		{"no tag: Go's pseudo-version", "", buildInfo("v0.0.0-20260101120000-0123456789ab", "vcs.revision", rev), "0.0.0-20260101120000-0123456789ab", rev},
		{"devel with vcs", "", buildInfo("(devel)", "vcs.revision", rev, "vcs.time", "2026-01-01T12:00:00Z", "vcs.modified", "true"),
			"0.0.0-20260101120000-0123456789ab-dirty", rev},
		{"devel clean", "", buildInfo("(devel)", "vcs.revision", rev, "vcs.time", "2026-01-01T12:00:00Z", "vcs.modified", "false"),
			"0.0.0-20260101120000-0123456789ab", rev},
		{"packager's wins", "1.0.0-1", buildInfo("v0.9.0", "vcs.revision", rev), "1.0.0-1", rev},
		{"packager's, no build info", "1.0.0", nil, "1.0.0", ""},
		{"nothing known", "", buildInfo("(devel)"), "devel", ""},
		{"no build info", "", nil, "unknown", ""},
	} {
		if v, r := fromBuild(tc.set, tc.bi); v != tc.want || r != tc.wantRev {
			t.Errorf("%s: %q %q, want %q %q", tc.name, v, r, tc.want, tc.wantRev)
		}
	}
}

func TestRDMACore(t *testing.T) {
	for in, want := range map[string]string{
		"libibverbs.so.1.14.44.0": "44.0",
		"1.14.50.1":               "50.1", // pkg-config's form
		"libibverbs.so.1":         "",
		"libibverbs.so":           "",
		"not recorded":            "",
	} {
		if got := RDMACore(in); got != want {
			t.Errorf("RDMACore(%q) = %q, want %q", in, got, want)
		}
	}
}

// The library is found in a maps file by name and resolved through its
// symlink, as the loader maps libibverbs.so.1 -> libibverbs.so.1.14.44.0.
func TestLoadedLibrary(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "libibverbs.so.1.14.44.0")
	if err := os.WriteFile(real, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "libibverbs.so.1")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	maps := filepath.Join(dir, "maps")
	content := "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libc.so.6\n" +
		"7f02-7f03 r-xp 00000000 08:01 2 " + link + "\n7f04-7f05 rw-p 00000000 00:00 0 [heap]\n"
	if err := os.WriteFile(maps, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := loadedLibrary(maps, "libibverbs.so"); got != real {
		t.Errorf("loadedLibrary = %q, want %q", got, real)
	}
	if got := loadedLibrary(maps, "libnccl.so"); got != "" {
		t.Errorf("loadedLibrary(libnccl) = %q, want none", got)
	}
	if got := soVersion(real); got != "1.14.44.0" {
		t.Errorf("soVersion = %q", got)
	}
}

func TestWriteText(t *testing.T) {
	in := Info{Tool: "ncclbench", Version: "1.2.3-dirty", Revision: "abc", Go: "go1.26.0", VerbsBuilt: "1.14.44.0",
		Verbs:  &Library{Path: "/lib/libibverbs.so.1.14.44.0", Version: "1.14.44.0", RDMACore: "44.0"},
		NCCL:   &Library{Error: "not found (searched: /x)"},
		CUDART: &Library{Path: "/lib/libcudart.so.12", Version: "12.4"}}
	var b strings.Builder
	if err := in.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ncclbench 1.2.3-dirty\n", "commit:            abc\n", "libibverbs built:  1.14.44.0 (rdma-core 44.0)\n",
		"libibverbs loaded: 1.14.44.0 /lib/libibverbs.so.1.14.44.0 (rdma-core 44.0)\n", "NCCL:              not found (searched: /x)\n",
		"CUDA runtime:      12.4 /lib/libcudart.so.12\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

// Get on this test binary: what holds for any build (a test binary has no
// VCS stamp nor -X settings, and maps no libibverbs).
func TestGet(t *testing.T) {
	in := Get("rdmabench", true)
	if in.Tool != "rdmabench" || in.Version == "" || !strings.HasPrefix(in.Go, "go") || in.VerbsBuilt != NotRecorded {
		t.Errorf("Get = %+v", in)
	}
	if Get("ncclbench", false).VerbsBuilt != "" {
		t.Error("a binary without verbs says it was built against libibverbs")
	}
}

func TestPackage(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"1.2.3", "1.2.3", true},
		{"1.2.3-rc.1", "1.2.3~rc.1", true},
		{"1.2.4-0.20260101120000-0123456789ab", "1.2.4~0.20260101120000.0123456789ab", true},
		{"0.0.0-20260101120000-0123456789ab-dirty", "0.0.0~20260101120000.0123456789ab+dirty", true},
		{"1.2.3-dirty", "1.2.3+dirty", true},
		{"2.0.0+incompatible", "2.0.0+incompatible", true},
		{"devel", "", false},
		{"unknown", "", false},
		{"", "", false},
		{"1.0 beta", "", false},
	} {
		got, err := Package(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Package(%q) = %q, %v; want %q (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// The mapped versions sort as Go's do: a pre-release and a pseudo-version
// past a tag before the next release, a dirty build after its clean one.
// dpkg's rule for "~" and "+" is checked by dpkg itself where it is here.
func TestPackageOrder(t *testing.T) {
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		t.Skip("no dpkg here to compare versions with (apt-get install dpkg)")
	}
	order := []string{"1.2.3", "1.2.4-0.20260101120000-0123456789ab", "1.2.4-0.20260101120000-0123456789ab-dirty", "1.2.4-rc.1", "1.2.4", "1.2.4-dirty"}
	for i := 0; i+1 < len(order); i++ {
		a, _ := Package(order[i])
		b, _ := Package(order[i+1])
		if err := exec.Command(dpkg, "--compare-versions", a, "lt", b).Run(); err != nil {
			t.Errorf("dpkg: %s (from %s) is not before %s (from %s): %v", a, order[i], b, order[i+1], err)
		}
	}
}
