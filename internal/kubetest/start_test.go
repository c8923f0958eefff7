package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB whose Skip and Fatal end only the goroutine
// that Start runs in, and whose cleanups run when start returns, so that
// a test can read all that Start and its cleanup said.
type recorder struct {
	testing.TB
	skipped, failed bool
	out             strings.Builder
	cleanups        []func()
}

func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recorder) Helper()       {}
func (r *recorder) Failed() bool  { return r.failed }
func (r *recorder) Skip(a ...any) { r.Skipf("%s", fmt.Sprint(a...)) }
func (r *recorder) Skipf(f string, a ...any) {
	r.skipped = true
	fmt.Fprintf(&r.out, f+"\n", a...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(f string, a ...any) {
	r.failed = true
	fmt.Fprintf(&r.out, f+"\n", a...)
	runtime.Goexit()
}
func (r *recorder) Logf(f string, a ...any) { fmt.Fprintf(&r.out, f+"\n", a...) }

// start runs Start under a recorder and waits for it to return or end.
func start(t *testing.T) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(r)
	}()
	<-done
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	return r
}

// fakeTools is a tools directory whose binaries are shell scripts.
func fakeTools(t *testing.T, scripts map[string]string) string {
	dir := t.TempDir()
	for _, name := range components {
		body, ok := scripts[name]
		if !ok {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Missing tools skip with the command that builds them.
func TestStartSkips(t *testing.T) {
	all := map[string]string{"kube-apiserver": "", "kube-controller-manager": "", "kube-scheduler": "", "kubectl": ""}
	noKubectl := map[string]string{"kube-apiserver": "", "kube-controller-manager": "", "kube-scheduler": ""}
	for _, tc := range []struct {
		name, tools, want string
	}{
		{"unset", "", "RDMABENCH_KUBE_TOOLS is unset; ci/kube-tools.sh builds"},
		{"no kubectl", fakeTools(t, noKubectl), "no kubectl in RDMABENCH_KUBE_TOOLS="},
		{"no etcd", fakeTools(t, all), "no etcd in PATH; install Debian's etcd-server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(ToolsEnv, tc.tools)
			if tc.name == "no etcd" {
				t.Setenv("PATH", t.TempDir())
			}
			r := start(t)
			if !r.skipped || !strings.Contains(r.out.String(), tc.want) {
				t.Errorf("skipped %v, said %q; want a skip saying %q", r.skipped, r.out.String(), tc.want)
			}
		})
	}
}

// An apiserver that dies fails Start at once, with its exit and its log.
func TestStartAPIServerDies(t *testing.T) {
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("no etcd in PATH; install Debian's etcd-server")
	}
	t.Setenv(ToolsEnv, fakeTools(t, map[string]string{
		"kube-apiserver":          "echo 'E1205 run.go:72] \"command failed\" err=\"kubetest fake\"'; exit 3",
		"kube-controller-manager": "", "kube-scheduler": "", "kubectl": "",
	}))
	r := start(t)
	for _, want := range []string{"kube-apiserver ended before", "exit status 3", `err="kubetest fake"`} {
		if !r.failed || !strings.Contains(r.out.String(), want) {
			t.Errorf("failed %v, said:\n%s\nwant it to say %q", r.failed, r.out.String(), want)
		}
	}
}
