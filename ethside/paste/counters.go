package paste

import (
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// counters returns it's Counters, adding src to its Source.
func counters(it *ethside.Iface, src string) *ethside.Counters {
	if it.Counters == nil {
		it.Counters = &ethside.Counters{Source: src, Values: map[string]uint64{}}
		return it.Counters
	}
	if it.Counters.Values == nil {
		it.Counters.Values = map[string]uint64{}
	}
	it.Counters.Source += "+" + src
	return it.Counters
}

// parseStats reads `ethtool -S IF`: "name: value" lines. The name is
// everything before the last colon, so bnx2x's "[0]: rx_bytes" stays
// whole. A value that is not a counter is a problem; a heading is not.
func parseStats(lines []string, src string, it *ethside.Iface) error {
	fresh := it.Counters == nil
	c := counters(it, src)
	var fe firstErr
	read := 0
	defer func() {
		if read == 0 && fresh {
			it.Counters = nil
		}
	}()
	for i, raw := range lines {
		at := strings.LastIndexByte(raw, ':')
		if at < 0 {
			continue
		}
		name, val := strings.TrimSpace(raw[:at]), strings.TrimSpace(raw[at+1:])
		if val == "" || name == "" { // "NIC statistics:"
			continue
		}
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			fe.add(i+1, "%s %q is not a counter", name, val)
			continue
		}
		c.Values[name] = n
		read++
	}
	if read == 0 && fe.err == nil {
		return errorf(0, "no name: counter line: not `ethtool -S IF` output")
	}
	return fe.err
}

// parseHWCounters reads the RDMA device's counters, either as
// `grep . hw_counters/*` prints them ("out_of_buffer:0", with or without
// a path) or as `rdma statistic show` prints them ("link mlx5_0/1
// rx_write_requests 0 ..."), whose pairs may wrap anywhere, a name at
// one line's end and its value at the next one's start: a link's words
// run until a blank line or the next link, and pair up only then.
func parseHWCounters(lines []string, src string, it *ethside.Iface) error {
	fresh := it.Counters == nil
	c := counters(it, src)
	before := len(c.Values)
	var fe firstErr
	var words []string
	linkLine := 0
	flush := func() {
		if linkLine > 0 {
			addPairs(c, words, linkLine, &fe)
		}
		words, linkLine = nil, 0
	}
	for i, raw := range lines {
		f := strings.Fields(raw)
		switch {
		case len(f) == 0:
			flush()
		case f[0] == "link" && len(f) >= 2:
			flush()
			linkLine = i + 1
			if dev, _, ok := strings.Cut(f[1], "/"); ok && it.RDMADev == "" {
				it.RDMADev = dev
			}
			words = append(words, f[2:]...)
		case linkLine > 0 && !strings.Contains(raw, ":"):
			words = append(words, f...)
		case strings.Contains(raw, ":"):
			flush()
			addColon(c, raw, i+1, &fe)
		}
	}
	flush()
	if len(c.Values) == before {
		if fresh {
			it.Counters = nil
		}
		if fe.err == nil {
			return errorf(0, "no name:value line or rdma link block: not hw_counters output")
		}
	}
	return fe.err
}

func addColon(c *ethside.Counters, raw string, line int, fe *firstErr) {
	at := strings.LastIndexByte(raw, ':')
	name := strings.TrimSpace(raw[:at])
	if slash := strings.LastIndexByte(name, '/'); slash >= 0 {
		name = name[slash+1:]
	}
	val := strings.TrimSpace(raw[at+1:])
	n, err := strconv.ParseUint(val, 10, 64)
	if err != nil || name == "" {
		fe.add(line, "%q is not name:counter", strings.TrimSpace(raw))
		return
	}
	c.AddHW(name, n)
}

func addPairs(c *ethside.Counters, f []string, line int, fe *firstErr) {
	for j := 0; j+1 < len(f); j += 2 {
		n, err := strconv.ParseUint(f[j+1], 10, 64)
		if err != nil {
			fe.add(line, "%s %q is not a counter", f[j], f[j+1])
			return
		}
		c.AddHW(f[j], n)
	}
	if len(f)%2 == 1 {
		fe.add(line, "%s has no value", f[len(f)-1])
	}
}
