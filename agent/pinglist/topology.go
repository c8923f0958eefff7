// Package pinglist reads the agent's two input files, the topology (which
// ToR or rail each host hangs under) and the peers file (the agents'
// HOST:PORT addresses), and draws a node's pinglist from them: every peer
// under its own ToR plus k random peers under other ToRs, drawn anew each
// period, so that a node probes O(ToR size + k) peers however large the
// fabric.
package pinglist

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Limits on what the files may hold: a file is read whole into memory, so
// its size is bounded before anything is kept.
const (
	MaxLineBytes = 1024    // a longer line is an error, not truncated
	MaxEntries   = 1 << 20 // hosts in a topology, peers in a peers file
	MaxNameBytes = 253     // a DNS name's longest
)

// ParseError is one bad line of an input file.
type ParseError struct {
	File string // "topology" or "peers", or the file's path
	Line int    // 1-based
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s line %d: %s", e.File, e.Line, e.Msg) }

// Topology is which ToR (or rail) each host is under. Hosts are kept
// grouped by ToR, each ToR's hosts sorted, so that a ToR is one range of
// Hosts and a draw from "every host outside my ToR" is a draw of an index.
type Topology struct {
	Hosts []string       // grouped by ToR (ToRs sorted), sorted within a ToR
	ToRs  []string       // sorted
	torOf map[string]int // host → index in ToRs
	start []int          // ToR index → its first index in Hosts; start[len(ToRs)] = len(Hosts)
}

// ToR is the ToR of host, and whether the topology has the host.
func (t *Topology) ToR(host string) (string, bool) {
	i, ok := t.torOf[host]
	if !ok {
		return "", false
	}
	return t.ToRs[i], true
}

// Under is the hosts under ToR index i, a range of Hosts.
func (t *Topology) under(i int) []string { return t.Hosts[t.start[i]:t.start[i+1]] }

// ParseTopology reads the topology file: one `HOST TOR` a line (white
// space between), `#` to the end of a line a comment, blank lines ignored.
// A host listed twice, a line with one field or three, an over-long line
// or name, or too many lines is an error naming its line. name labels the
// errors (the file's path).
func ParseTopology(r io.Reader, name string) (*Topology, error) {
	torOf := map[string]string{}
	lineOf := map[string]int{}
	err := scanLines(r, name, func(n int, fields []string) error {
		if len(fields) != 2 {
			return fmt.Errorf("want HOST TOR, got %d fields", len(fields))
		}
		host, tor := fields[0], fields[1]
		if err := checkName(host); err != nil {
			return fmt.Errorf("host %q: %v", host, err)
		}
		if err := checkName(tor); err != nil {
			return fmt.Errorf("ToR %q: %v", tor, err)
		}
		if first, dup := lineOf[host]; dup {
			return fmt.Errorf("host %s listed again (first on line %d)", host, first)
		}
		if len(torOf) == MaxEntries {
			return fmt.Errorf("more than %d hosts", MaxEntries)
		}
		torOf[host], lineOf[host] = tor, n
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(torOf) == 0 {
		return nil, &ParseError{File: name, Line: 0, Msg: "no hosts"}
	}
	return newTopology(torOf), nil
}

// NewTopology makes a topology of host → ToR (the simulation's and the
// tests' way in, the file's too).
func NewTopology(torOf map[string]string) *Topology { return newTopology(torOf) }

func newTopology(torOf map[string]string) *Topology {
	t := &Topology{torOf: make(map[string]int, len(torOf))}
	hosts := make([]string, 0, len(torOf))
	tors := map[string]bool{}
	for h, tor := range torOf {
		hosts = append(hosts, h)
		tors[tor] = true
	}
	for tor := range tors {
		t.ToRs = append(t.ToRs, tor)
	}
	slices.Sort(t.ToRs)
	slices.SortFunc(hosts, func(a, b string) int {
		if c := strings.Compare(torOf[a], torOf[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	t.Hosts = hosts
	t.start = make([]int, 0, len(t.ToRs)+1)
	for i, h := range hosts {
		ti, _ := slices.BinarySearch(t.ToRs, torOf[h])
		t.torOf[h] = ti
		if len(t.start) == ti {
			t.start = append(t.start, i)
		}
	}
	t.start = append(t.start, len(hosts))
	return t
}

// scanLines calls line for each line that holds something once comments
// are cut, with its fields; an error from it, an over-long line or a read
// error is a *ParseError naming the line.
func scanLines(r io.Reader, name string, line func(n int, fields []string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes+1)
	lines := 0
	for sc.Scan() {
		lines++
		if lines > 4*MaxEntries { // comments and blank lines are bounded too
			return &ParseError{File: name, Line: lines, Msg: fmt.Sprintf("more than %d lines", 4*MaxEntries)}
		}
		text := sc.Text()
		if len(text) > MaxLineBytes {
			return &ParseError{File: name, Line: lines, Msg: fmt.Sprintf("longer than %d bytes", MaxLineBytes)}
		}
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		if err := line(lines, fields); err != nil {
			return &ParseError{File: name, Line: lines, Msg: err.Error()}
		}
	}
	if err := sc.Err(); err != nil {
		msg := err.Error()
		if err == bufio.ErrTooLong {
			msg = fmt.Sprintf("longer than %d bytes", MaxLineBytes)
		}
		return &ParseError{File: name, Line: lines + 1, Msg: msg}
	}
	return nil
}

// checkName accepts what a host name, an address or a switch's name is
// written with; anything else (a control byte, a quote, a label's braces)
// would end up in a metric label or a log line.
func checkName(s string) error {
	if len(s) > MaxNameBytes {
		return fmt.Errorf("longer than %d bytes", MaxNameBytes)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '.', c == '_', c == ':', c == '/', c == '[', c == ']':
		default:
			return fmt.Errorf("byte %q not allowed (letters, digits and - . _ : / [ ])", c)
		}
	}
	return nil
}
