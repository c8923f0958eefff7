package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		list string
		want []string
		err  string
	}{
		{"node1", []string{"node1"}, ""},
		{"a,b,c[1-2]", []string{"a", "b", "c1", "c2"}, ""},
		{"node[01-03,07],gpu-a[1-2]", []string{"node01", "node02", "node03", "node07", "gpu-a1", "gpu-a2"}, ""},
		{"n[8-11]", []string{"n8", "n9", "n10", "n11"}, ""},
		{"n[08-11]", []string{"n08", "n09", "n10", "n11"}, ""},
		{"x[009-011]", []string{"x009", "x010", "x011"}, ""},
		{"n[7-010]", []string{"n7", "n8", "n9", "n10"}, ""}, // the low end sets the width
		{"n[0-2]", []string{"n0", "n1", "n2"}, ""},
		{"n[98-100]", []string{"n98", "n99", "n100"}, ""},
		{"n[5]", []string{"n5"}, ""},
		{"rack[1-2]-n[01-02]", []string{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}, ""},
		{"gpu-dgx-a100-[001-002],cpu7", []string{"gpu-dgx-a100-001", "gpu-dgx-a100-002", "cpu7"}, ""},
		{"n[3-1]", nil, "backwards"},
		{"n[1-2", nil, "without ']'"},
		{"n1-2]", nil, "without '['"},
		{"n[]", nil, "empty brackets"},
		{"n[a-b]", nil, "not a number"},
		{"n[1-]", nil, "not a number"},
		{"a,,b", nil, "empty name"},
		{"", nil, "empty name"},
		{"n[1-99999999]", nil, "more than"},
	}
	for _, tc := range tests {
		got, err := ExpandHostlist(tc.list)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ExpandHostlist(%q) = %v, %v; want an error with %q", tc.list, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ExpandHostlist(%q) = %q, %v; want %q", tc.list, got, err, tc.want)
		}
		if f, err := FirstHost(tc.list); err != nil || f != tc.want[0] {
			t.Errorf("FirstHost(%q) = %q, %v", tc.list, f, err)
		}
	}
	// The first host of a huge (valid) list comes without expanding it.
	if f, err := FirstHost("n[000001-900000],m[1-900000]"); err != nil || f != "n000001" {
		t.Errorf("FirstHost of a long list: %q %v", f, err)
	}
}

// Slurm's own expander agrees with ours (scontrol needs a slurm.conf to
// start, not a controller, for show hostnames).
func TestExpandHostlistScontrol(t *testing.T) {
	sc, err := exec.LookPath("scontrol")
	if err != nil {
		t.Skip("scontrol not installed (ci/deps.sh installs slurm-client)")
	}
	conf := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(conf, []byte("ClusterName=t\nSlurmctldHost=localhost\nNodeName=x\nPartitionName=p Nodes=x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, list := range []string{"node[01-03,07],gpu-a[1-2]", "n[8-11]", "x[009-011],y", "n[7-010]", "rack[1-2]-n[01-02]", "n[98-100],a,b[3,1]", "c[0-2,5-6,10]"} {
		cmd := exec.Command(sc, "show", "hostnames", list)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("scontrol show hostnames %s: %v", list, err)
		}
		want := strings.Fields(string(out))
		if got, err := ExpandHostlist(list); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: ours %q (%v), scontrol's %q", list, got, err, want)
		}
	}
}

// vars is base with extra's KEY, VALUE pairs set (an empty VALUE unsets
// KEY), and the Env that Detect finds in them.
func vars(t *testing.T, base map[string]string, extra ...string) (Env, map[string]string) {
	t.Helper()
	m := map[string]string{}
	for k, v := range base {
		m[k] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == "" {
			delete(m, extra[i])
		} else {
			m[extra[i]] = extra[i+1]
		}
	}
	e, err := Detect(envOf(m))
	if err != nil {
		t.Fatal(err)
	}
	return e, m
}

func TestFindRendezvous(t *testing.T) {
	slurm := func(rank int, extra ...string) (Env, map[string]string) {
		return vars(t, map[string]string{"SLURM_PROCID": strconv.Itoa(rank), "SLURM_NTASKS": "8", "SLURM_STEP_ID": "3", "SLURM_JOB_ID": "123457",
			"SLURM_STEP_NODELIST": "gpu[07-08,11],cpu1", "SLURM_JOB_NODELIST": "gpu[01-12],cpu[1-4]", "SLURM_STEP_NUM_NODES": "4"}, extra...)
	}
	ompi := func(local string, extra ...string) (Env, map[string]string) {
		return vars(t, map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
			"OMPI_COMM_WORLD_LOCAL_SIZE": local, "PMIX_NAMESPACE": "1048510465", "OMPI_MCA_ess_base_jobid": "1048510465"}, extra...)
	}
	torch := Env{Rank: 1, Size: 2, Launcher: Torchrun}
	ompiPort := strconv.Itoa(hashPort("1048510465"))
	type tcase struct {
		name     string
		flag     string
		port     int
		env      Env
		vars     map[string]string
		want     string
		from     string // part of From
		derived  bool
		err      string // part of the error
		hintPart string
	}
	var tests []tcase
	add := func(tc tcase) { tests = append(tests, tc) }
	add(tcase{name: "flag wins", flag: "10.0.0.1:5000", env: torch, vars: map[string]string{"MASTER_ADDR": "x", "MASTER_PORT": "1"}, want: "10.0.0.1:5000", from: "--rendezvous"})
	add(tcase{name: "bad flag", flag: "nohostport", env: torch, err: "want host:port"})
	add(tcase{name: "master", env: torch, vars: map[string]string{"MASTER_ADDR": "node1", "MASTER_PORT": "29400"}, want: "node1:29400", from: "MASTER_PORT", hintPart: "MASTER_PORT is taken"})
	add(tcase{name: "master default port", env: torch, vars: map[string]string{"MASTER_ADDR": "node1"}, want: "node1:29500", from: "default port"})
	add(tcase{name: "torchrun port+1", env: torch, vars: map[string]string{"MASTER_ADDR": "node1", "MASTER_PORT": "29400", "TORCHELASTIC_RUN_ID": "x"}, want: "node1:29401", from: "MASTER_PORT+1", hintPart: "--rdzv-port"})
	add(tcase{name: "torchrun --rdzv-port", port: 31000, env: torch, vars: map[string]string{"MASTER_ADDR": "node1", "MASTER_PORT": "29400", "TORCHELASTIC_RUN_ID": "x"}, want: "node1:31000", from: "--rdzv-port", hintPart: "--rdzv-port"})
	add(tcase{name: "port 70000", port: 70000, env: torch, vars: map[string]string{"MASTER_ADDR": "node1"}, err: "not a port"})
	add(tcase{name: "torchrun bad port", env: torch, vars: map[string]string{"MASTER_ADDR": "node1", "MASTER_PORT": "x", "TORCHELASTIC_RUN_ID": "x"}, err: "not a port"})
	add(tcase{name: "bad MASTER_PORT", env: torch, vars: map[string]string{"MASTER_ADDR": "node1", "MASTER_PORT": "x"}, err: "MASTER_PORT=\"x\" is not a port"})
	add(tcase{name: "MASTER_PORT out of range", env: torch, vars: map[string]string{"MASTER_ADDR": "node1", "MASTER_PORT": "70000"}, err: "not a port"})
	add(tcase{name: "nothing", env: torch, err: "several processes need a rendezvous"})
	// Slurm: 20000 + (123457*10 + 3) % 10000 = 24573.
	e, m := slurm(2)
	add(tcase{name: "slurm step list", env: e, vars: m, want: "gpu07:24573", from: "derived from SLURM_STEP_NODELIST and SLURM_JOB_ID", derived: true, hintPart: "--rdzv-port"})
	e, m = slurm(2, "SLURM_STEP_NODELIST", "")
	add(tcase{name: "slurm job list", env: e, vars: m, want: "gpu01:24573", from: "SLURM_JOB_NODELIST", derived: true})
	e, m = slurm(0, "SLURMD_NODENAME", "gpu07")
	add(tcase{name: "slurm rank 0 on the first node", env: e, vars: m, want: "gpu07:24573", derived: true})
	e, m = slurm(0, "SLURMD_NODENAME", "gpu08")
	add(tcase{name: "slurm rank 0 elsewhere", env: e, vars: m, err: "rank 0 runs on gpu08, not on gpu07"})
	e, m = slurm(0, "SLURMD_NODENAME", "gpu08", "SLURM_STEP_NUM_NODES", "1")
	add(tcase{name: "slurm one node", env: e, vars: m, want: "127.0.0.1:24573", from: "SLURM_STEP_NUM_NODES=1", derived: true})
	e, m = slurm(1, "MASTER_ADDR", "head", "MASTER_PORT", "6000")
	add(tcase{name: "MASTER_ADDR wins over slurm", env: e, vars: m, want: "head:6000"})
	e, m = slurm(1)
	add(tcase{name: "slurm --rdzv-port", port: 4000, env: e, vars: m, want: "gpu07:4000", from: "--rdzv-port", derived: true})
	e, m = slurm(1, "SLURM_STEP_NODELIST", "", "SLURM_JOB_NODELIST", "")
	add(tcase{name: "slurm no list", env: e, vars: m, err: "SLURM_STEP_NODELIST"})
	e, m = slurm(1, "SLURM_JOB_ID", "")
	add(tcase{name: "slurm no job", env: e, vars: m, err: "SLURM_JOB_ID"})
	e, m = slurm(1, "SLURM_STEP_NODELIST", "gpu[2-1]")
	add(tcase{name: "slurm bad list", env: e, vars: m, err: "backwards"})
	e, m = ompi("4")
	add(tcase{name: "ompi one host", env: e, vars: m, want: "127.0.0.1:" + ompiPort, from: "OMPI_COMM_WORLD_LOCAL_SIZE=4", derived: true})
	e, m = ompi("4", "PMIX_NAMESPACE", "")
	add(tcase{name: "ompi jobid", env: e, vars: m, want: "127.0.0.1:" + ompiPort, from: "OMPI_MCA_ess_base_jobid", derived: true})
	e, m = ompi("2")
	add(tcase{name: "ompi two hosts", env: e, vars: m, err: "2 of the 4 processes on this host"})
	e, m = ompi("4", "PMIX_NAMESPACE", "", "OMPI_MCA_ess_base_jobid", "")
	add(tcase{name: "ompi no job id", env: e, vars: m, err: "PMIX_NAMESPACE"})
	add(tcase{name: "pmi", env: Env{Rank: 1, Size: 2, Source: "PMI", Launcher: PMI}, err: "PMI gives no address"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindRendezvous(tc.flag, tc.port, tc.env, envOf(tc.vars))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got.Addr != tc.want || got.Derived != tc.derived || !strings.Contains(got.From, tc.from) || !strings.Contains(got.Hint, tc.hintPart) || got.Hint == "" {
				t.Errorf("got %+v, %v; want %s derived=%v from %q", got, err, tc.want, tc.derived, tc.from)
			}
		})
	}
}

// Derived ports stay in the documented range, for any job id.
func TestDerivedPorts(t *testing.T) {
	for _, job := range []uint64{0, 1, 9999, 123456789, 1<<63 + 12345} {
		for _, step := range []uint64{0, 7, 4294967294} {
			if p := slurmPort(job, step); p < DerivedPortBase || p >= DerivedPortBase+DerivedPorts {
				t.Errorf("slurmPort(%d, %d) = %d", job, step, p)
			}
		}
	}
	if slurmPort(100, 0) == slurmPort(101, 0) || slurmPort(100, 0) == slurmPort(100, 1) {
		t.Error("neighbouring jobs or steps share a port")
	}
	for _, ns := range []string{"", "1048510465", "prterun-host-1234@1"} {
		if p := hashPort(ns); p < DerivedPortBase || p >= DerivedPortBase+DerivedPorts {
			t.Errorf("hashPort(%q) = %d", ns, p)
		}
	}
}
