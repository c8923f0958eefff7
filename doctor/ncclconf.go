package doctor

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rdmabench/rdmabench/internal/suggest"
)

// confLine is one assignment of an NCCL config file.
type confLine struct {
	name, value string
	line        int
}

// parseNCCLConf reads a file the way NCCL's setEnvFile does: lines starting
// with '#' are comments; the name is everything before the first '=' and
// the value everything after it, trailing white space removed. Nothing is
// trimmed or unquoted, so "export X=1" sets a variable named "export X".
func parseNCCLConf(path string) ([]confLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []confLine
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		out = append(out, confLine{name: name, value: strings.TrimRightFunc(value, func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' }), line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// ncclConfFiles are the files NCCL reads, in the order it reads them:
// NCCL_CONF_FILE, or ~/.nccl.conf when that is unset; then /etc/nccl.conf.
func (o *Options) ncclConfFiles() []string {
	var files []string
	if f := o.Env["NCCL_CONF_FILE"]; f != "" {
		files = append(files, f)
	} else if o.HomeDir != "" {
		files = append(files, filepath.Join(o.HomeDir, ".nccl.conf"))
	}
	return append(files, filepath.Join(o.EtcRoot, "nccl.conf"))
}

// confSource records where a variable in the merged environment came from.
type confSource struct {
	file       string
	line       int
	overridden bool // the environment (or an earlier file) already set it
}

// mergeNCCLConf adds the config files' settings to opts.Env as NCCL does:
// a variable already set keeps its value (setenv without overwrite).
func mergeNCCLConf(opts *Options) (map[string][]confSource, []confLine, []string) {
	sources := map[string][]confSource{}
	var bad []confLine
	var read []string
	for _, file := range opts.ncclConfFiles() {
		lines, err := parseNCCLConf(file)
		if err != nil {
			continue // NCCL skips missing files silently
		}
		read = append(read, file)
		for _, l := range lines {
			if !isEnvName(l.name) || strings.ContainsAny(l.value, `"'`) {
				l.name = file + ":" + fmt.Sprint(l.line) + ": " + l.name
				bad = append(bad, l)
				continue
			}
			_, set := opts.Env[l.name]
			sources[l.name] = append(sources[l.name], confSource{file: file, line: l.line, overridden: set})
			if !set {
				opts.Env[l.name] = l.value
			}
		}
	}
	return sources, bad, read
}

// checkNCCLConf reports the config files NCCL reads, what they set, and
// lines NCCL misreads (an "export " prefix, quotes).
func checkNCCLConf(h *host) []Finding {
	var out []Finding
	for _, file := range h.confRead {
		var set []string
		for name, srcs := range h.confSources {
			for _, s := range srcs {
				if s.file != file {
					continue
				}
				v := name + "=" + h.opts.Env[name]
				if s.overridden {
					v = name + " (overridden by the environment)"
				}
				set = append(set, v)
			}
		}
		slices.Sort(set)
		out = append(out, Finding{Check: "nccl.conf", Status: Info, Subject: filepath.Base(file), Source: file,
			Value: "NCCL reads it: " + orDefault(strings.Join(set, ", "), "no settings")})
	}
	for _, l := range h.confBad {
		out = append(out, Finding{Check: "nccl.conf", Status: Warn, Subject: "nccl.conf",
			Value:  fmt.Sprintf("%s=%s: NCCL takes the name and value literally", l.name, l.value),
			Remedy: "write NAME=value lines: no \"export\", no spaces around '=', no quotes"})
	}
	return out
}

// checkNCCLNames: a misspelt variable does nothing and says nothing.
func checkNCCLNames(h *host) []Finding {
	var names []string
	for k := range h.opts.Env {
		if strings.HasPrefix(k, "NCCL_") {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	var out []Finding
	for _, n := range names {
		if knownNCCLVars[n] || slices.ContainsFunc(pluginVarPrefixes, func(p string) bool { return strings.HasPrefix(n, p) }) {
			continue
		}
		f := Finding{Check: "nccl.env", Status: Warn, Subject: n, Value: n + " is not a variable NCCL reads"}
		if near := nearestName(n); near != "" {
			f.Value += " (did you mean " + near + "?)"
		}
		f.Remedy = "fix the name: NCCL ignores variables it does not know without a word"
		out = append(out, f)
	}
	if len(out) == 0 {
		out = append(out, Finding{Check: "nccl.env", Status: Pass, Subject: "NCCL_*",
			Value: fmt.Sprintf("%d NCCL variable(s), all known", len(names))})
	}
	return out
}

// nearestName is the known variable closest to a misspelt one, within a
// few edits; "" when none is close.
func nearestName(s string) string {
	best, bestD := "", 4
	for k := range knownNCCLVars {
		if d := suggest.Levenshtein(s, k); d < bestD || (d == bestD && best != "" && k < best) {
			best, bestD = k, d
		}
	}
	return best
}
