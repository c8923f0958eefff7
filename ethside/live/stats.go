package live

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/ethside"
)

const (
	ethSSStats    = 1     // ETH_SS_STATS, the string set of ethtool -S
	ethGStringLen = 32    // ETH_GSTRING_LEN
	maxStats      = 16384 // mlx5 with many channels shows a few thousand
)

// ssetInfo is struct ethtool_sset_info asking for one set's size.
type ssetInfo struct {
	cmd, reserved uint32
	mask          uint64
	data          [1]uint32
	_             uint32
}

// stats reads ethtool -S: ETHTOOL_GSSET_INFO for the count, GSTRINGS for
// the names and GSTATS for the values.
func (k *kernel) stats(name string, p *problems) *ethside.Counters {
	n, err := k.statsCount(name)
	if err != nil {
		note(p, "SIOCETHTOOL ETHTOOL_GSSET_INFO", name, err)
		return nil
	}
	if n == 0 {
		return nil
	}
	names, err := k.statNames(name, n)
	if err != nil {
		note(p, "SIOCETHTOOL ETHTOOL_GSTRINGS", name, err)
		return nil
	}
	vals, err := k.statValues(name, len(names))
	if err != nil {
		note(p, "SIOCETHTOOL ETHTOOL_GSTATS", name, err)
		return nil
	}
	c := &ethside.Counters{Source: "SIOCETHTOOL ETHTOOL_GSTATS " + name,
		Values: make(map[string]uint64, len(vals))}
	for i, v := range vals {
		c.Values[names[i]] = v
	}
	return c
}

func (k *kernel) statsCount(name string) (int, error) {
	si := ssetInfo{cmd: unix.ETHTOOL_GSSET_INFO, mask: 1 << ethSSStats}
	if err := ethtoolIoctl(k.fd, name, unsafe.Pointer(&si)); err != nil {
		return 0, err
	}
	if si.mask&(1<<ethSSStats) == 0 {
		return 0, nil
	}
	if si.data[0] > maxStats {
		return 0, fmt.Errorf("%d statistics, over the bound of %d", si.data[0], maxStats)
	}
	return int(si.data[0]), nil
}

// slack: the kernel sizes GSTRINGS and GSTATS by its own count at the
// call, which may have grown since GSSET_INFO (channels added); the
// buffer leaves room for that and the answer's own count is trusted only
// up to what was asked.
func withSlack(n int) int { return 2*n + 64 }

// statNames runs ETHTOOL_GSTRINGS (struct ethtool_gstrings: cmd,
// string_set, len, then len names of ETH_GSTRING_LEN bytes).
func (k *kernel) statNames(name string, n int) ([]string, error) {
	buf := make([]byte, 12+withSlack(n)*ethGStringLen)
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GSTRINGS)
	binary.NativeEndian.PutUint32(buf[4:], ethSSStats)
	binary.NativeEndian.PutUint32(buf[8:], uint32(n))
	if err := ethtoolIoctl(k.fd, name, unsafe.Pointer(&buf[0])); err != nil {
		return nil, err
	}
	got := min(int(binary.NativeEndian.Uint32(buf[8:])), n)
	names := make([]string, got)
	for i := range names {
		s := buf[12+i*ethGStringLen : 12+(i+1)*ethGStringLen]
		if j := bytes.IndexByte(s, 0); j >= 0 {
			s = s[:j]
		}
		names[i] = string(s)
	}
	return names, nil
}

// statValues runs ETHTOOL_GSTATS (struct ethtool_stats: cmd, n_stats,
// then n_stats __u64).
func (k *kernel) statValues(name string, n int) ([]uint64, error) {
	buf := make([]uint64, 1+withSlack(n))
	hdr := (*[2]uint32)(unsafe.Pointer(&buf[0]))
	hdr[0] = unix.ETHTOOL_GSTATS
	hdr[1] = uint32(n)
	if err := ethtoolIoctl(k.fd, name, unsafe.Pointer(&buf[0])); err != nil {
		return nil, err
	}
	got := min(int(hdr[1]), n)
	return append([]uint64(nil), buf[1:1+got]...), nil
}
