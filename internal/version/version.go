// Package version says what a binary is: its version (from the git tag or
// commit it was built from, or what a packager set), the Go that built it,
// the libibverbs it was built against and the libraries it loaded at run
// time. `rdmabench version`, `ncclbench version` and every JSON document
// both tools write carry the same Info.
package version

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time by packaging and make (-ldflags -X), since neither can
// be known from the source alone:
//
//	-X github.com/rdmabench/rdmabench/internal/version.version=1.2.3
//	-X github.com/rdmabench/rdmabench/internal/version.verbsBuilt=$(pkg-config --modversion libibverbs)
var (
	version    string // overrides the version from build info
	verbsBuilt string // libibverbs' version (pkg-config) where the binary was built
)

// NotRecorded is what Info says of the build-time libibverbs when the build
// did not record it: the headers carry no version, only pkg-config does.
const NotRecorded = "not recorded (build with make, or -ldflags -X ...version.verbsBuilt=$(pkg-config --modversion libibverbs))"

// Library is a shared library found at run time.
type Library struct {
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
	// RDMACore is the rdma-core release of a libibverbs, read from its
	// file name (libibverbs.so.1.14.44.0 is rdma-core 44.0).
	RDMACore string `json:"rdma_core,omitempty"`
	// Error says why the library is absent (NCCL not found...).
	Error string `json:"error,omitempty"`
}

// Info is what a binary is. Tool and Version always are set.
type Info struct {
	Tool     string `json:"tool"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"` // the commit built
	Go       string `json:"go"`
	// VerbsBuilt is the libibverbs version the binary was built against
	// (pkg-config's), or NotRecorded; empty for a binary without verbs.
	VerbsBuilt string `json:"libibverbs_built,omitempty"`
	// Verbs is the libibverbs loaded at run time.
	Verbs  *Library `json:"libibverbs,omitempty"`
	NCCL   *Library `json:"nccl,omitempty"`
	CUDART *Library `json:"cudart,omitempty"`
}

// Get describes this binary. linksVerbs says whether it is linked against
// libibverbs (rdmabench is; ncclbench is not: NCCL loads its own).
func Get(tool string, linksVerbs bool) Info {
	bi, _ := debug.ReadBuildInfo()
	in := Info{Tool: tool, Go: runtime.Version()}
	in.Version, in.Revision = fromBuild(version, bi)
	if linksVerbs {
		in.VerbsBuilt = verbsBuilt
		if in.VerbsBuilt == "" {
			in.VerbsBuilt = NotRecorded
		}
	}
	if p := loadedLibrary("/proc/self/maps", "libibverbs.so"); p != "" {
		in.Verbs = &Library{Path: p, Version: soVersion(p), RDMACore: RDMACore(filepath.Base(p))}
	}
	return in
}

// fromBuild picks the version: the packager's, else the module version Go
// stamped from the git tag (v1.2.3, or a pseudo-version past it), else a
// pseudo-version from the commit. A build from a modified tree ends in
// -dirty.
func fromBuild(set string, bi *debug.BuildInfo) (ver, rev string) {
	if bi == nil {
		if set != "" {
			return set, ""
		}
		return "unknown", ""
	}
	var vcsTime string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			vcsTime = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	switch v := bi.Main.Version; {
	case set != "":
		return set, rev
	case v != "" && v != "(devel)":
		v = strings.TrimPrefix(v, "v")
		if strings.HasSuffix(v, "+dirty") {
			v = strings.TrimSuffix(v, "+dirty") + "-dirty"
		}
		return v, rev
	case rev != "":
		stamp := strings.NewReplacer("-", "", ":", "", "T", "", "Z", "").Replace(vcsTime)
		v := "0.0.0-" + stamp + "-" + rev[:min(12, len(rev))]
		if stamp == "" {
			v = "0.0.0-" + rev[:min(12, len(rev))]
		}
		if dirty {
			v += "-dirty"
		}
		return v, rev
	}
	return "devel", ""
}

// loadedLibrary is the file a library named name* is mapped from, symlinks
// resolved; "" when none is mapped.
func loadedLibrary(maps, name string) string {
	f, err := os.Open(maps)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, "/")
		if i < 0 || !strings.HasPrefix(filepath.Base(line[i:]), name) {
			continue
		}
		p := line[i:]
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return p
	}
	return ""
}

// soVersion is what follows ".so." in a library's file name: 1.14.44.0.
func soVersion(path string) string {
	_, v, _ := strings.Cut(filepath.Base(path), ".so.")
	return v
}

// reVerbsLib matches libibverbs' file name, whose third number is the
// rdma-core release that built it: libibverbs.so.1.14.50.0 is rdma-core 50.0.
var reVerbsLib = regexp.MustCompile(`^libibverbs\.so\.1\.\d+\.(\d+)\.(\d+)$`)

// RDMACore is the rdma-core release of a libibverbs file name (or of
// pkg-config's version of it, 1.14.44.0); "" when the name says none.
func RDMACore(name string) string {
	if !strings.HasPrefix(name, "libibverbs") {
		name = "libibverbs.so." + name
	}
	if m := reVerbsLib.FindStringSubmatch(name); m != nil {
		return m[1] + "." + m[2]
	}
	return ""
}

// WriteText prints the Info for `version`: one fact a line.
func (in Info) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", in.Tool, in.Version)
	if in.Revision != "" {
		fmt.Fprintf(&b, "  commit:            %s\n", in.Revision)
	}
	fmt.Fprintf(&b, "  go:                %s\n", in.Go)
	if in.VerbsBuilt != "" {
		built := in.VerbsBuilt
		if rc := RDMACore(built); rc != "" {
			built += " (rdma-core " + rc + ")"
		}
		fmt.Fprintf(&b, "  libibverbs built:  %s\n", built)
	}
	for _, l := range []struct {
		name string
		lib  *Library
	}{{"libibverbs loaded", in.Verbs}, {"NCCL", in.NCCL}, {"CUDA runtime", in.CUDART}} {
		switch {
		case l.lib == nil && l.name == "libibverbs loaded":
			fmt.Fprintf(&b, "  %-18s %s\n", l.name+":", "none")
		case l.lib == nil:
		case l.lib.Error != "":
			fmt.Fprintf(&b, "  %-18s %s\n", l.name+":", l.lib.Error)
		default:
			s := l.lib.Path
			if l.lib.Version != "" {
				s = l.lib.Version + " " + s
			}
			if l.lib.RDMACore != "" {
				s += " (rdma-core " + l.lib.RDMACore + ")"
			}
			fmt.Fprintf(&b, "  %-18s %s\n", l.name+":", s)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// rePackage is what Package accepts: a version starting with a digit, of
// the characters Go's versions and a packager's use.
var rePackage = regexp.MustCompile(`^[0-9][0-9A-Za-z.+-]*$`)

// Package maps a version from fromBuild to one valid as a .deb's upstream
// version and an .rpm's Version, ordered as Go orders them: the first "-"
// (a pre-release: 1.2.4-0.2026...-abc sorts before 1.2.4) becomes "~",
// which both sort before the release; later ones become "." (dpkg would
// take a "-" for the start of the Debian revision and rpm refuses one);
// -dirty becomes +dirty, after the same commit's clean build.
func Package(v string) (string, error) {
	if !rePackage.MatchString(v) {
		return "", fmt.Errorf("version %q cannot be a package version (it must start with a digit: build from a git clone, where Go records the commit, which it does not in a git worktree, or set VERSION=)", v)
	}
	dirty := strings.HasSuffix(v, "-dirty")
	v = strings.TrimSuffix(v, "-dirty")
	if rel, pre, ok := strings.Cut(v, "-"); ok {
		v = rel + "~" + strings.ReplaceAll(pre, "-", ".")
	}
	if dirty {
		v += "+dirty"
	}
	return v, nil
}
