package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// contrib/slurm's scripts run with this test binary as rdmabench (on the
// rxe capture) and a stand-in scontrol that records what it is told and
// answers `show node` with the record the case gives.
type slurmStage struct {
	dir, calls, logs string
	env              []string
}

func newSlurmStage(t *testing.T, nodeRecord string, healthArgs ...string) *slurmStage {
	t.Helper()
	s := &slurmStage{dir: t.TempDir()}
	s.calls, s.logs = filepath.Join(s.dir, "scontrol.calls"), filepath.Join(s.dir, "logger.lines")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(s.dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("rdmabench", "RDMABENCH_RUN_MAIN=1 exec "+self+` "$@"`)
	write("scontrol", `echo "$*" >>`+s.calls+`
[ "$1" = show ] && printf '%s\n' "$NODE_RECORD"
exit 0`)
	write("logger", `shift 2; echo "$*" >>`+s.logs)
	args := append(rxeArgs(), healthArgs...)
	s.env = append(os.Environ(), "PATH="+s.dir+":"+os.Getenv("PATH"), "SLURMD_NODENAME=n1", "NODE_RECORD="+nodeRecord,
		"RDMABENCH="+filepath.Join(s.dir, "rdmabench"), "SCONTROL="+filepath.Join(s.dir, "scontrol"),
		"RDMABENCH_HEALTH_ARGS="+strings.Join(args, " "))
	return s
}

func (s *slurmStage) run(t *testing.T, name string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = s.env
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}

func (s *slurmStage) scontrolCalls() string {
	b, _ := os.ReadFile(s.calls)
	return string(b)
}

func TestSlurmHealthCheckProgram(t *testing.T) {
	script, _ := filepath.Abs("../../contrib/slurm/rdmabench-healthcheck")
	wrongGID := writeFile(t, "job.sh", "export NCCL_IB_GID_INDEX=0\n")
	drainedByUs := "NodeName=n1 Arch=x86_64 State=IDLE+DRAIN Reason=rdmabench: RB121 rxe0:1 index 0 [root@2026-12-02T03:00:00]"
	drainedByAdmin := "NodeName=n1 Arch=x86_64 State=IDLE+DRAIN Reason=fan 2 failed [admin@2026-12-01T10:00:00]"
	for _, tc := range []struct {
		name, record string
		args         []string
		want         string // scontrol's calls after show
	}{
		{"unhealthy: drained with the reason", "NodeName=n1 State=IDLE", []string{"--no-bw", "--env-file", wrongGID}, "update nodename=n1 state=drain reason=rdmabench: RB121 rxe0:1 "},
		{"healthy again: resumed", drainedByUs, []string{"--no-bw"}, "show node n1 -o\nupdate nodename=n1 state=resume\n"},
		{"healthy, drained by someone else: left", drainedByAdmin, []string{"--no-bw"}, "show node n1 -o\n"},
		{"cannot check: left", drainedByUs, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSlurmStage(t, tc.record, tc.args...)
			code, out := s.run(t, script)
			calls := s.scontrolCalls()
			if code != 0 || !strings.HasPrefix(calls, tc.want) || (tc.want == "" && calls != "") {
				t.Errorf("exit %d %q\nscontrol was told:\n%s\nwant it to start %q", code, out, calls, tc.want)
			}
			if strings.Contains(calls, "drain") && strings.Count(calls, "\n") != 1 {
				t.Errorf("the reason is not one line:\n%s", calls)
			}
		})
	}
}

func TestSlurmPrologAndNHC(t *testing.T) {
	wrongGID := writeFile(t, "job.sh", "export NCCL_IB_GID_INDEX=0\n")
	prolog, _ := filepath.Abs("../../contrib/slurm/prolog-rdmabench")
	nhc, _ := filepath.Abs("../../contrib/slurm/rdmabench.nhc")
	// The prolog runs `rdmabench health --no-bw`; the environment carries
	// the job's wrong GID index.
	s := newSlurmStage(t, "", "--expect-bw", "100")
	s.env = append(s.env, "NCCL_IB_GID_INDEX=0")
	if code, out := s.run(t, prolog); code != 1 || !strings.Contains(s.scontrolCalls(), "state=drain reason=rdmabench: RB121") {
		t.Errorf("prolog on an unhealthy node: exit %d %q; scontrol: %s", code, out, s.scontrolCalls())
	}
	// NHC sources the check and calls it with nhc.conf's arguments; its
	// die() records the reason.
	s = newSlurmStage(t, "")
	harness := `die() { echo "DIE $1 $2"; }; log() { echo "LOG $*"; }; . ` + nhc + `; check_rdmabench_health "$@"; echo "rc $?"`
	args := append([]string{"-c", harness, "nhc"}, append(rxeArgs(), "--no-bw", "--env-file", wrongGID)...)
	if code, out := s.run(t, "bash", args...); code != 0 || !strings.Contains(out, "DIE 1 check_rdmabench_health: rdmabench: RB121 rxe0:1") || !strings.Contains(out, "rc 1") {
		t.Errorf("NHC, unhealthy: exit %d\n%s", code, out)
	}
	args = append([]string{"-c", harness, "nhc"}, rxeArgs()...) // a capture with a measurement asked: cannot check
	if code, out := s.run(t, "bash", args...); code != 0 || !strings.Contains(out, "LOG check_rdmabench_health: cannot check (rdmabench health exit 3: rdmabench: RB901") || !strings.Contains(out, "rc 0") {
		t.Errorf("NHC, cannot check: exit %d\n%s", code, out)
	}
}
