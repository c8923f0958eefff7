package live

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/ethside"
)

// rxeHWCounters are rxe's hw_counters names, as
// drivers/infiniband/sw/rxe/rxe_hw_counters.c names them.
var rxeHWCounters = []string{"sent_pkts", "rcvd_pkts", "duplicate_request", "out_of_seq_request",
	"rcvd_rnr_err", "send_rnr_err", "rcvd_seq_err", "ack_deferred", "retry_exceeded_err",
	"retry_rnr_exceeded_err", "completer_retry_err", "send_err", "link_downed", "rdma_sends", "rdma_recvs"}

// mlx5HWCounters are some of mlx5's (drivers/infiniband/hw/mlx5/counters.c:
// basic, out-of-sequence, retransmission and congestion groups), with a
// value each.
var mlx5HWCounters = map[string]uint64{"rx_write_requests": 9, "out_of_buffer": 7, "out_of_sequence": 0,
	"duplicate_request": 0, "rnr_nak_retry_err": 0, "packet_seq_err": 0, "local_ack_timeout_err": 0,
	"rp_cnp_ignored": 0, "rp_cnp_handled": 2, "np_ecn_marked_roce_packets": 5, "np_cnp_sent": 3}

// TestHWCountersRxe: rxe on veth0 has no device/infiniband link under the
// netdev; its port is found by the GID table that names veth0, and its
// hw_counters join ethtool -S's, "lifespan" (no counter) left out.
func TestHWCountersRxe(t *testing.T) {
	sys := t.TempDir()
	port := "class/infiniband/rxe0/ports/1/"
	files := map[string]string{
		port + "gids/0": "fe80:0000:0000:0000:5054:00ff:fe12:3456", port + "gid_attrs/ndevs/0": "veth0",
		port + "gid_attrs/types/0": "RoCE v2", port + "link_layer": "Ethernet",
		port + "hw_counters/lifespan": "10",
	}
	for i, n := range rxeHWCounters {
		files[port+"hw_counters/"+n] = strconv.Itoa(i)
	}
	writeTree(t, sys, files)
	p := &problems{}
	c := withHWCounters(&ethside.Counters{Source: "ethtool", Values: map[string]uint64{"rx_packets": 5}}, sys, "", "veth0", p)
	if len(p.lines) != 0 || c == nil {
		t.Fatalf("counters %+v problems %v", c, p.lines)
	}
	if len(c.Values) != len(rxeHWCounters)+1 || c.Values["rx_packets"] != 5 || c.Values["retry_exceeded_err"] != 8 || c.Values["rdma_recvs"] != 14 {
		t.Errorf("values %v", c.Values)
	}
	if _, ok := c.Values["lifespan"]; ok {
		t.Error("lifespan read as a counter")
	}
	if want := "ethtool+" + filepath.Join(sys, port, "hw_counters"); c.Source != want {
		t.Errorf("source %q, want %q", c.Source, want)
	}
	if got := withHWCounters(nil, sys, "", "eth9", p); got != nil || len(p.lines) != 0 {
		t.Errorf("a netdev no GID names: %+v %v, want nil and no problem", got, p.lines)
	}
}

// TestHWCountersMLX5: mlx5_0 under eth2's device, a two-port device whose
// second port is eth3's; the congestion and buffer counters land with the
// kinds the judgements look for, a name ethtool -S gave already as
// "hw:"+name.
func TestHWCountersMLX5(t *testing.T) {
	sys := t.TempDir()
	files := map[string]string{
		"class/net/eth2/device/infiniband/mlx5_0/node_type":         "1: CA",
		"class/infiniband/mlx5_0/ports/1/gids/0":                    "fe80:0000:0000:0000:5054:00ff:fe12:0001",
		"class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0":         "eth2",
		"class/infiniband/mlx5_0/ports/2/gids/0":                    "fe80:0000:0000:0000:5054:00ff:fe12:0002",
		"class/infiniband/mlx5_0/ports/2/gid_attrs/ndevs/0":         "eth3",
		"class/infiniband/mlx5_0/ports/2/hw_counters/out_of_buffer": "99",
	}
	for n, v := range mlx5HWCounters {
		files["class/infiniband/mlx5_0/ports/1/hw_counters/"+n] = strconv.FormatUint(v, 10)
	}
	writeTree(t, sys, files)
	dev := rdmaDevOf(sys, "eth2")
	p := &problems{}
	c := withHWCounters(&ethside.Counters{Source: "ethtool", Values: map[string]uint64{"rx_write_requests": 1}}, sys, dev, "eth2", p)
	if dev != "mlx5_0" || c == nil || len(p.lines) != 0 {
		t.Fatalf("dev %q counters %+v problems %v", dev, c, p.lines)
	}
	if c.Values["rx_write_requests"] != 1 || c.Values["hw:rx_write_requests"] != 9 || c.Values["out_of_buffer"] != 7 {
		t.Errorf("values %v: want ethtool's rx_write_requests kept, port 1's beside it", c.Values)
	}
	for name, kind := range map[string]ethside.CounterKind{"out_of_buffer": ethside.CounterDiscard,
		"np_cnp_sent": ethside.CounterCongestion, "rp_cnp_handled": ethside.CounterCongestion,
		"np_ecn_marked_roce_packets": ethside.CounterCongestion} {
		if _, ok := c.Values[name]; !ok || ethside.ClassifyCounter(name).Kind != kind {
			t.Errorf("%s: present %v, kind %v, want %v", name, ok, ethside.ClassifyCounter(name).Kind, kind)
		}
	}
	c3 := withHWCounters(nil, sys, dev, "eth3", p)
	if c3 == nil || c3.Values["out_of_buffer"] != 99 || !strings.HasSuffix(c3.Source, filepath.Join("ports", "2", "hw_counters")) {
		t.Errorf("eth3: %+v, want port 2's", c3)
	}
	if got := withHWCounters(nil, sys, dev, "eth7", p); got != nil {
		t.Errorf("eth7, no port of two names it: %+v", got)
	}
}
