package daemon

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rdmabench/rdmabench/agent/metrics"
	"github.com/rdmabench/rdmabench/agent/pinglist"
)

// Self is this agent as the peers file names it: its host and listening
// port. An entry of that host and port, or of the listen address itself,
// is this agent and is not probed.
type Self struct {
	Host   string
	Listen string // HOST:PORT as given to --listen
}

func (s Self) is(p pinglist.Peer) bool {
	if p.Addr() == s.Listen {
		return true
	}
	_, port, err := net.SplitHostPort(s.Listen)
	return err == nil && p.Name() == s.Host && strconv.Itoa(int(p.Port)) == port
}

// Pinglist is the peers this agent probes this period: without a topology
// every other agent, all one ToR-mesh; with one, the agents on hosts under
// this host's ToR and on the k hosts Build draws from other ToRs, every
// agent of a drawn host (one per RNIC). skipped counts peers whose host
// the topology does not have.
func Pinglist(all []pinglist.Peer, self Self, topo *pinglist.Topology, k int, d pinglist.Draw) (peers []metrics.Peer, skipped int, err error) {
	if topo == nil {
		for _, p := range all {
			if !self.is(p) {
				peers = append(peers, metrics.Peer{Addr: p.Addr(), Host: p.Name(), Scope: pinglist.ScopeToR})
			}
		}
		return peers, 0, nil
	}
	l, err := pinglist.Build(topo, self.Host, k, d)
	if err != nil {
		return nil, 0, err
	}
	byHost := map[string][]pinglist.Peer{}
	for _, p := range all {
		if _, ok := topo.ToR(p.Name()); !ok {
			skipped++
			continue
		}
		byHost[p.Name()] = append(byHost[p.Name()], p)
	}
	// The other agents of this host (one per RNIC) are under its ToR too.
	for _, p := range byHost[self.Host] {
		if !self.is(p) {
			peers = append(peers, metrics.Peer{Addr: p.Addr(), Host: p.Name(), ToR: l.ToR, Scope: pinglist.ScopeToR})
		}
	}
	for _, e := range l.Entries {
		for _, p := range byHost[e.Host] {
			peers = append(peers, metrics.Peer{Addr: p.Addr(), Host: p.Name(), ToR: e.ToR, Scope: e.Scope})
		}
	}
	return peers, skipped, nil
}

// readPeersFile reads the peers file whole (bounded by the parser).
func readPeersFile(path string) ([]pinglist.Peer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return pinglist.ParsePeers(f, path)
}

// fileStamp is what tells a changed file: size, modification time and
// inode (an editor's rename, or a ConfigMap's symlink swap, keeps the
// size and may keep the time).
type fileStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{size: fi.Size(), mtime: fi.ModTime(), ino: inode(fi)}, nil
}

// SlurmTimeout bounds one sinfo call.
const SlurmTimeout = 10 * time.Second

// slurmPeers is every node of the Slurm cluster (sinfo's node list, one a
// line), each at port.
func slurmPeers(ctx context.Context, sinfo string, port uint16) ([]pinglist.Peer, error) {
	ctx, cancel := context.WithTimeout(ctx, SlurmTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, sinfo, "--noheader", "--Node", "--format=%N")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if ctx.Err() != nil {
			msg = fmt.Sprintf("no answer within %v", SlurmTimeout)
		}
		return nil, fmt.Errorf("sinfo: %v: %s", err, firstLine(msg))
	}
	var peers []pinglist.Peer
	seen := map[string]bool{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if name == "" || seen[name] {
			continue // sinfo --Node lists a node once per partition
		}
		if len(peers) == pinglist.MaxEntries {
			return nil, fmt.Errorf("sinfo: more than %d nodes", pinglist.MaxEntries)
		}
		p, err := pinglist.ParsePeer(net.JoinHostPort(name, strconv.Itoa(int(port))))
		if err != nil {
			return nil, fmt.Errorf("sinfo: node %q: %v", name, err)
		}
		seen[name] = true
		peers = append(peers, p)
	}
	return peers, sc.Err()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
