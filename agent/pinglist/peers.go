package pinglist

import (
	"fmt"
	"io"
	"net"
	"strconv"
)

// Peer is another agent's address, as the peers file gives it.
type Peer struct {
	Host string
	Port uint16
	// Node is the peer's host name where Host is only an address (from
	// Kubernetes' EndpointSlices: the endpoint's nodeName), "" otherwise.
	Node string
}

// Name is the peer's host as the topology and the metrics name it.
func (p Peer) Name() string {
	if p.Node != "" {
		return p.Node
	}
	return p.Host
}

// Addr is the peer as HOST:PORT (an IPv6 address bracketed).
func (p Peer) Addr() string { return net.JoinHostPort(p.Host, strconv.Itoa(int(p.Port))) }

// ParsePeers reads the peers file: one HOST:PORT a line (`[v6]:PORT` for an
// IPv6 address), `#` comments and blank lines ignored. A line listed twice
// is kept once, in its first place; a missing or out-of-range port, an
// empty or ill-formed host, an over-long line or too many peers is an
// error naming its line.
func ParsePeers(r io.Reader, name string) ([]Peer, error) {
	var peers []Peer
	seen := map[Peer]bool{}
	err := scanLines(r, name, func(n int, fields []string) error {
		if len(fields) != 1 {
			return fmt.Errorf("want one HOST:PORT, got %d fields", len(fields))
		}
		p, err := ParsePeer(fields[0])
		if err != nil {
			return err
		}
		if seen[p] {
			return nil
		}
		if len(peers) == MaxEntries {
			return fmt.Errorf("more than %d peers", MaxEntries)
		}
		seen[p] = true
		peers = append(peers, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return peers, nil
}

// ParsePeer reads one HOST:PORT.
func ParsePeer(s string) (Peer, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return Peer{}, fmt.Errorf("%q: want HOST:PORT", s)
	}
	if host == "" {
		return Peer{}, fmt.Errorf("%q: no host", s)
	}
	if err := checkName(host); err != nil {
		return Peer{}, fmt.Errorf("host %q: %v", host, err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return Peer{}, fmt.Errorf("%q: port %q outside 1..65535", s, port)
	}
	return Peer{Host: host, Port: uint16(n)}, nil
}
