package doctor

import (
	"fmt"
	"time"

	"github.com/rdmabench/rdmabench/ethside"
)

// ethPort is one interface as the Ethernet checks judge it: the latest
// reading, and the counters of both readings under --watch.
type ethPort struct {
	now    ethside.Iface
	before *ethside.Counters // the first reading's
	after  *ethside.Counters // the second's; nil without --watch
	watch  time.Duration     // how far apart the readings were; 0 unwatched
	prio   rocePriority
}

// subject names the interface as operators know it: "mlx5_0/eth2".
func (p *ethPort) subject() string {
	if p.now.RDMADev != "" {
		return p.now.RDMADev + "/" + p.now.Name
	}
	return p.now.Name
}

// ethReadings holds the Ethernet side as read before the checks ran, so
// that --watch waits once for the RDMA counters and these together.
type ethReadings struct {
	first  []ethside.Iface
	err    error
	waited bool // checkCounters already waited Watch since first
}

// readEthernetFirst takes the first reading; Run calls it before any check.
func (h *host) readEthernetFirst() {
	if h.opts.Ethernet == nil {
		return
	}
	h.eth = &ethReadings{}
	h.eth.first, h.eth.err = h.opts.Ethernet.Read()
}

// ethJudge is one Ethernet check: its name and its verdict on one port.
type ethJudge struct {
	check string
	judge func(*ethPort) Finding
}

// ethJudges are the Ethernet checks in report order (eth.input apart).
var ethJudges = []ethJudge{
	{"eth.link", judgeLink}, {"eth.fec", judgeFEC},
	{"eth.pfc", judgePFC}, {"eth.trust", judgeTrust}, {"eth.ecn", judgeECN},
	{"eth.errors", judgeLinkErrors}, {"eth.pause", judgePause}, {"eth.ber", judgeBER},
	{"eth.flaps", judgeFlaps},
	{"eth.optics", judgeOptics}, {"eth.temp", judgeTemp},
	{"eth.rings", judgeRings}, {"eth.coalesce", judgeCoalesce}, {"eth.channels", judgeChannels},
	{"eth.globalpause", judgeGlobalPause}, // PFC's counterpart, last for its later code
}

// ethCheckNames are the Ethernet checks' names in report order.
func ethCheckNames() []string {
	out := []string{"eth.input"}
	for _, j := range ethJudges {
		out = append(out, j.check)
	}
	return out
}

// checkEthernet judges the Ethernet side of the RoCE ports (eth.*), when
// Options.Ethernet gives one. Under --watch it reads a second time, Watch
// after the first, and judges the counters' growth.
func checkEthernet(h *host) []Finding {
	if h.eth == nil {
		return nil
	}
	if h.eth.err != nil {
		return []Finding{{Check: "eth.input", Status: Skip, Subject: "host",
			Value: "cannot read the Ethernet side: " + h.eth.err.Error()}}
	}
	ports, out := h.ethPorts()
	for _, j := range ethJudges {
		for _, p := range ports {
			f := j.judge(p)
			f.Check, f.Subject = j.check, p.subject()
			if (f.Status == Warn || f.Status == Fail) && p.now.RDMADev != "" {
				// An unused port's faults do not slow the job (scope.go);
				// a device this host does not know is judged.
				f = h.scopedDev(p.now.RDMADev, f)
			}
			out = append(out, f)
		}
	}
	return out
}

// ethPorts pairs the readings by interface name, with eth.input's SKIPs:
// one per problem an input had, and one when nothing was read.
func (h *host) ethPorts() ([]*ethPort, []Finding) {
	var second map[string]ethside.Iface
	var out []Finding
	if h.opts.Watch > 0 {
		if s, saved := h.opts.Ethernet.(ethside.SavedReader); !h.eth.waited && (!saved || !s.Saved()) {
			h.opts.Wait(h.opts.Watch)
		}
		list, err := h.opts.Ethernet.Read()
		if err != nil {
			out = append(out, Finding{Check: "eth.input", Status: Skip, Subject: "host",
				Value: "second reading (--watch): " + err.Error() + "; counters judged as of the first"})
		} else {
			second = map[string]ethside.Iface{}
			for _, i := range list {
				second[i.Name] = i
			}
		}
	}
	if len(h.eth.first) == 0 {
		out = append(out, Finding{Check: "eth.input", Status: Skip, Subject: "host", Value: "no interfaces read"})
	}
	var ports []*ethPort
	for _, i := range h.eth.first {
		p := &ethPort{now: i, before: i.Counters}
		if s, ok := second[i.Name]; ok {
			p.now, p.after, p.watch = s, s.Counters, h.opts.Watch
			if p.before == nil || p.after == nil {
				p.after, p.watch = nil, 0
			}
		}
		p.prio = roceTrafficPriority(h.opts.Env, p.now.DCB)
		ports = append(ports, p)
		for _, problem := range p.now.Problems {
			out = append(out, Finding{Check: "eth.input", Status: Skip, Subject: p.subject(), Value: problem})
		}
	}
	return ports, out
}

// skipped is a check's SKIP for a part nothing said.
func skipped(what string) Finding {
	return Finding{Status: Skip, Value: "not shown: no " + what}
}

// mbps prints a speed as operators write it: "100G", "2.5G", "100M".
func mbps(v int) string {
	if v >= 1000 {
		return fmt.Sprintf("%gG", float64(v)/1000)
	}
	return fmt.Sprintf("%dM", v)
}
