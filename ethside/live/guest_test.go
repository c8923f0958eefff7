package live

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/ethtool"
	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/ethside"
)

// inGuest: the rxe guest (ci/rxe-tests.sh sets RDMABENCH_REQUIRE_HW=1);
// these tests change NIC settings and run only there.
func inGuest(t *testing.T) {
	t.Helper()
	if os.Getenv("RDMABENCH_REQUIRE_HW") != "1" {
		t.Skip("changes NIC settings: runs in the rxe guest only (RDMABENCH_REQUIRE_HW=1, ci/rxe-tests.sh)")
	}
}

// setParam reads an ethtool struct with get, edits words and writes it
// back with set.
func setParam(t *testing.T, k *kernel, iface string, get, set uint32, n int, edits map[int]uint32) error {
	t.Helper()
	w, err := getWords(k.fd, iface, get, n)
	if err != nil {
		return fmt.Errorf("get %#x: %w", get, err)
	}
	w[0] = set
	for i, v := range edits {
		w[i] = v
	}
	if err := setWords(k.fd, iface, w); err != nil {
		return fmt.Errorf("set %#x %v: %w", set, edits, err)
	}
	return nil
}

func readOneIface(t *testing.T, name string) ethside.Iface {
	t.Helper()
	got, err := Reader{Ifaces: []string{name}}.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(got[0].Problems) != 0 {
		t.Errorf("%s problems: %v", name, got[0].Problems)
	}
	return got[0]
}

func driverOf(iface string) string {
	l, err := os.Readlink(filepath.Join("/sys/class/net", iface, "device", "driver"))
	if err != nil {
		return ""
	}
	return filepath.Base(l)
}

// TestNetdevsimLive creates a netdevsim device, sets rings, channels,
// coalescing, pause and FEC through the kernel's ethtool interfaces, and
// reads them back with Reader. netdevsim has no DCB and no module EEPROM:
// those stay nil. Debian's kernels (the rxe guests' 6.12) are built
// without CONFIG_NETDEVSIM, so there it skips.
func TestNetdevsimLive(t *testing.T) {
	inGuest(t)
	if _, err := os.Stat("/sys/bus/netdevsim"); err != nil {
		// A kernel with netdevsim as a module shows the bus once loaded.
		out, merr := exec.Command("modprobe", "netdevsim").CombinedOutput()
		if _, err := os.Stat("/sys/bus/netdevsim"); err != nil {
			t.Skipf("no /sys/bus/netdevsim, and modprobe netdevsim gave %v %q: "+
				"this kernel has no netdevsim (Debian's kernels, the rxe guests' included, are built without CONFIG_NETDEVSIM); "+
				"its rings, channels, coalescing, pause and FEC are read from the real pastes instead (ethside/paste)",
				merr, strings.TrimSpace(string(out)))
		}
	}
	name := newNetdevsim(t, 4200+os.Getpid()%100, 4)
	k, err := openKernel()
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	for _, s := range []struct {
		get, set uint32
		n        int
		edits    map[int]uint32
	}{
		{unix.ETHTOOL_GRINGPARAM, unix.ETHTOOL_SRINGPARAM, ringWords, map[int]uint32{5: 512, 8: 256}},
		{unix.ETHTOOL_GCHANNELS, unix.ETHTOOL_SCHANNELS, channelsWords, map[int]uint32{8: 2}},
		{unix.ETHTOOL_GCOALESCE, unix.ETHTOOL_SCOALESCE, coalesceWords, map[int]uint32{1: 64, 5: 32, 10: 1}},
		{unix.ETHTOOL_GPAUSEPARAM, unix.ETHTOOL_SPAUSEPARAM, pauseWords, map[int]uint32{1: 0, 2: 1, 3: 0}},
	} {
		if err := setParam(t, k, name, s.get, s.set, s.n, s.edits); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	fecSet := k.eth.SetFEC(ethtool.FEC{Interface: ethtool.Interface{Name: name}, Modes: unix.ETHTOOL_FEC_RS})
	if fecSet != nil {
		t.Errorf("%s: FEC_SET RS: %v", name, fecSet)
	}
	v := readOneIface(t, name)
	t.Logf("%s: ring %+v channels %+v coalesce %+v pause %+v fec %+v", name, v.Ring, v.Channels, v.Coalesce, v.Pause, v.FEC)
	if v.Ring == nil || v.Ring.RX != 512 || v.Ring.TX != 256 || v.Ring.RXMax < 512 {
		t.Errorf("ring %+v, want rx 512 tx 256", v.Ring)
	}
	if v.Channels == nil || v.Channels.Combined != 2 || v.Channels.CombinedMax != 4 {
		t.Errorf("channels %+v, want combined 2 of 4", v.Channels)
	}
	if c := v.Coalesce; c == nil || c.RXUsecs != 64 || c.TXUsecs != 32 || !*c.AdaptiveRX || *c.AdaptiveTX {
		t.Errorf("coalesce %+v, want rx 64 tx 32 adaptive rx only", c)
	}
	if pa := v.Pause; pa == nil || *pa.Autoneg || !*pa.RX || *pa.TX {
		t.Errorf("pause %+v, want rx only, no autoneg", pa)
	}
	if fecSet == nil && (v.FEC == nil || !slices.Contains(v.FEC.Configured, "RS")) {
		t.Errorf("FEC %+v, want RS configured", v.FEC)
	}
	assertNil(t, name, map[string]bool{"DCB": v.DCB == nil, "Module": v.Module == nil, "HCATemp": v.HCATemp == nil})
}

// newNetdevsim creates netdevsim device id with one port and queues
// queues, removed at cleanup, and gives its netdev.
func newNetdevsim(t *testing.T, id, queues int) string {
	t.Helper()
	spec := fmt.Sprintf("%d 1 %d", id, queues)
	if err := os.WriteFile("/sys/bus/netdevsim/new_device", []byte(spec), 0); err != nil {
		t.Fatalf("netdevsim new_device %q: %v", spec, err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile("/sys/bus/netdevsim/del_device", []byte(fmt.Sprint(id)), 0)
	})
	dir := fmt.Sprintf("/sys/bus/netdevsim/devices/netdevsim%d/net", id)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
			return ents[0].Name()
		}
	}
	t.Fatalf("no netdev in %s after 10s", dir)
	return ""
}

// TestGuestNICLive reads the guest's emulated NICs (the two-node guest's
// virtio-net, or e1000 with RXE_NIC=e1000): the parts they lack (FEC,
// module EEPROM, DCB, hwmon) are nil, never an error; on e1000 the ring
// sizes and pause set through SIOCETHTOOL read back.
func TestGuestNICLive(t *testing.T) {
	inGuest(t)
	ents, _ := os.ReadDir("/sys/class/net")
	found := 0
	for _, e := range ents {
		drv := driverOf(e.Name())
		if drv != "virtio_net" && drv != "e1000" {
			continue
		}
		found++
		if drv == "e1000" {
			setE1000(t, e.Name())
		}
		v := readOneIface(t, e.Name())
		t.Logf("%s (%s): link %+v ring %+v coalesce %+v channels %+v pause %+v counters %d",
			e.Name(), drv, v.Link, v.Ring, v.Coalesce, v.Channels, v.Pause, countersLen(v.Counters))
		if v.Link == nil || v.Ring == nil || v.Counters == nil {
			t.Errorf("%s (%s): link %v ring %v counters %v, want all read", e.Name(), drv, v.Link, v.Ring, v.Counters)
		}
		if drv == "e1000" && (v.Ring.RX != 512 || v.Ring.TX != 512 || v.Pause == nil || !*v.Pause.RX || *v.Pause.TX) {
			t.Errorf("%s: ring %+v pause %+v, want 512/512 and rx pause only", e.Name(), v.Ring, v.Pause)
		}
		assertNil(t, e.Name(), map[string]bool{"FEC": v.FEC == nil, "Module": v.Module == nil,
			"DCB": v.DCB == nil, "HCATemp": v.HCATemp == nil})
	}
	if found == 0 {
		t.Skip("no virtio_net or e1000 netdev: the single-node guest has none (ci/rxe-run --hosts 2)")
	}
}

func setE1000(t *testing.T, name string) {
	t.Helper()
	k, err := openKernel()
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	if err := setParam(t, k, name, unix.ETHTOOL_GRINGPARAM, unix.ETHTOOL_SRINGPARAM, ringWords,
		map[int]uint32{5: 512, 8: 512}); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	if err := setParam(t, k, name, unix.ETHTOOL_GPAUSEPARAM, unix.ETHTOOL_SPAUSEPARAM, pauseWords,
		map[int]uint32{1: 0, 2: 1, 3: 0}); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

func countersLen(c *ethside.Counters) int {
	if c == nil {
		return 0
	}
	return len(c.Values)
}

// TestGuestRxeHWCountersLive: every netdev an RDMA device's GIDs name (rxe
// on the guest's veth0 or virtio netdev) reads that port's hw_counters
// among its counters, each name present (values move between reads).
func TestGuestRxeHWCountersLive(t *testing.T) {
	inGuest(t)
	ents, _ := os.ReadDir("/sys/class/net")
	found := 0
	for _, e := range ents {
		dev, port, ok := rdmaPortByGID("/sys", e.Name())
		if !ok {
			continue
		}
		found++
		names, err := os.ReadDir(filepath.Join("/sys/class/infiniband", dev, "ports", fmt.Sprint(port), "hw_counters"))
		if err != nil {
			t.Errorf("%s: %s port %d: %v", e.Name(), dev, port, err)
			continue
		}
		v := readOneIface(t, e.Name())
		for _, n := range names {
			if n.Name() == "lifespan" || v.Counters == nil {
				continue
			}
			_, plain := v.Counters.Values[n.Name()]
			_, hw := v.Counters.Values["hw:"+n.Name()]
			if !plain && !hw {
				t.Errorf("%s: %s/%d hw_counters/%s not among its counters", e.Name(), dev, port, n.Name())
			}
		}
		if v.Counters == nil || !strings.Contains(v.Counters.Source, "hw_counters") {
			t.Errorf("%s: counters %+v, want %s's hw_counters in them", e.Name(), v.Counters, dev)
		}
	}
	if found == 0 {
		t.Skip("no netdev that an RDMA device's GIDs name")
	}
}
