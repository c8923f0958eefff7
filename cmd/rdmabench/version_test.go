package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/version"
)

func TestVersionCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runMain([]string{"version", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var in version.Info
	if err := json.Unmarshal(out.Bytes(), &in); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	// This binary links libibverbs: it is mapped, and its file names the
	// rdma-core release. A test binary records no build-time version.
	if in.Tool != "rdmabench" || in.Version == "" || in.VerbsBuilt != version.NotRecorded {
		t.Errorf("version = %+v", in)
	}
	if in.Verbs == nil || !strings.HasPrefix(filepath.Base(in.Verbs.Path), "libibverbs.so") || in.Verbs.RDMACore == "" {
		t.Errorf("libibverbs loaded = %+v, want the mapped file and its rdma-core", in.Verbs)
	}
	out.Reset()
	if code := runMain([]string{"--version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "rdmabench "+in.Version+"\n") || !strings.Contains(out.String(), "libibverbs loaded: ") {
		t.Errorf("exit %d:\n%s", code, out.String())
	}
	errOut.Reset()
	if code := runMain([]string{"version", "x"}, &out, &errOut); code == 0 || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("exit %d, stderr %q: want an error, one line", code, errOut.String())
	}
}

// Every document carries the same version object as `version --json`.
func TestDocumentsCarryVersion(t *testing.T) {
	docs := map[string]string{}
	_, docs["doctor --json"], _ = runDoctorTest(t, nil, rxeArgs("--json")...)
	var out, errOut bytes.Buffer
	runMain([]string{"devices", "--json", "--sysfs-root", filepath.Join(rxeFixture, "sys")}, &out, &errOut)
	docs["devices --json"] = out.String()
	want, _ := json.Marshal(toolInfo())
	for name, doc := range docs {
		var d struct {
			Version json.RawMessage `json:"version"`
		}
		if err := json.Unmarshal([]byte(doc), &d); err != nil {
			t.Errorf("%s: %v: %s", name, err, doc)
			continue
		}
		var got bytes.Buffer
		if err := json.Compact(&got, d.Version); err != nil || got.String() != string(want) {
			t.Errorf("%s: version %s, want %s", name, d.Version, want)
		}
	}
}
