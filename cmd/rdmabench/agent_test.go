package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/agent/sizing"
)

func TestAgentCommand(t *testing.T) {
	t.Setenv(tokenEnv, "")
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("secret\n"), 0o600)
	peers := filepath.Join(dir, "peers")
	os.WriteFile(peers, []byte("127.0.0.1:9101\n"), 0o600)
	badPeers := filepath.Join(dir, "bad-peers")
	os.WriteFile(badPeers, []byte("127.0.0.1:9101\nnode2\n"), 0o600)
	topo := filepath.Join(dir, "topology")
	os.WriteFile(topo, []byte("node1 tor1\nnode2 tor1\n"), 0o600)
	const need = "rdmabench agent: --listen HOST:PORT is required (or --plan N to print a plan)"
	want := func(in sizing.Input) string {
		var b bytes.Buffer
		sizing.Make(in).WriteText(&b)
		return b.String()
	}
	custom := sizing.DefaultInput(5000, 16)
	custom.K, custom.Rate = 4, 20
	cases := []struct {
		args         []string
		code         int
		stdout, line string
	}{
		{[]string{"--plan", "10000", "--tor-size", "32"}, 0, want(sizing.DefaultInput(10000, 32)), ""},
		{[]string{"--plan", "5000", "--tor-size", "16", "--k", "4", "--rate", "20"}, 0, want(custom), ""},
		{nil, 2, "", need},
		{[]string{"--k", "3"}, 2, "", need},
		{[]string{"--listen", "127.0.0.1:0", "--token-file", token}, 2, "", "rdmabench agent: no peers: give --peers FILE, --slurm-port PORT or --kube-service NAME"},
		{[]string{"--listen", "127.0.0.1:0", "--token-file", token, "--peers", peers, "--slurm-port", "9100"}, 2, "", "rdmabench agent: --peers, --slurm-port and --kube-service: take the peers from one"},
		{[]string{"--listen", "127.0.0.1:0", "--token-file", token, "--kube-service", "agents", "--kubeconfig", filepath.Join(dir, "none")}, 2, "", "rdmabench agent: kubeconfig " + filepath.Join(dir, "none") + ": stat " + filepath.Join(dir, "none") + ": no such file or directory"},
		{[]string{"--listen", "127.0.0.1:0", "--peers", peers}, 2, "", "rdmabench agent: no job token: give --token-file FILE (or RDMABENCH_TOKEN): peers fetch each other's addresses with it"},
		{[]string{"--listen", "127.0.0.1:0", "--peers", peers, "--token-file", filepath.Join(dir, "none")}, 2, "", "rdmabench agent: token file: open " + filepath.Join(dir, "none") + ": no such file or directory"},
		{[]string{"--listen", "127.0.0.1:0", "--peers", badPeers, "--token-file", token}, 2, "", "rdmabench agent: " + badPeers + ` line 2: "node2": want HOST:PORT`},
		{[]string{"--listen", "127.0.0.1:0", "--peers", peers, "--token-file", token, "--topology", topo, "--host", "node3"}, 2, "", "rdmabench agent: host node3 is not in " + topo + " (give --host as the topology names it)"},
		{[]string{"--listen", "127.0.0.1:0", "--peers", peers, "--token-file", token, "--rate", "0"}, 2, "", "rdmabench agent: rate 0 probes a second a peer: want more than 0, at most 1000"},
		{[]string{"--listen", "127.0.0.1:0", "--peers", peers, "--token-file", token, "--timeout", "0"}, 2, "", "rdmabench agent: probe timeout 0s: want more than 0, at most a minute"},
		{[]string{"--listen", "127.0.0.1:0", "--peers", peers, "--token-file", token, "-x", "256"}, 2, "", "rdmabench agent: --gid-index 256 outside 0..255"},
		{[]string{"--plan", "1"}, 2, "", "rdmabench agent: --plan 1 outside 2..1048576 nodes"},
		{[]string{"--plan", "100", "--tor-size", "101"}, 2, "", "rdmabench agent: --tor-size 101 outside 1..100 (the nodes)"},
		{[]string{"--plan", "100", "--rate", "0"}, 2, "", "rdmabench agent: --rate 0 outside (0, 1000] probes a second"},
		{[]string{"--plan", "100", "--redraw", "x"}, 2, "", `rdmabench agent: invalid argument "x" for "--redraw" flag: want seconds (30, 2.5) or a duration (30s, 1m30s, 500ms) (see --help)`},
		{[]string{"--plan", "100", "extra"}, 2, "", `rdmabench agent: takes no arguments (got "extra")`},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := runMain(append([]string{"agent"}, c.args...), &out, &errb)
		if code != c.code || out.String() != c.stdout || strings.TrimSuffix(errb.String(), "\n") != c.line {
			t.Errorf("agent %v: exit %d, stdout %q, stderr %q; want %d, %q, %q", c.args, code, out.String(), errb.String(), c.code, c.stdout, c.line)
		}
	}
}
