package live

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/ethside"
)

// TestLoopbackAnswersNothing: lo has no ethtool link modes, rings, module
// or DCB; every part stays nil (SKIP) and nothing is a problem.
func TestLoopbackAnswersNothing(t *testing.T) {
	got, err := Reader{Ifaces: []string{"lo"}}.Read()
	if err != nil {
		t.Fatal(err)
	}
	lo := got[0]
	if len(lo.Problems) != 0 {
		t.Fatalf("lo problems: %v", lo.Problems)
	}
	assertNil(t, "lo", map[string]bool{"Link": lo.Link == nil, "FEC": lo.FEC == nil,
		"Ring": lo.Ring == nil, "Module": lo.Module == nil, "DCB": lo.DCB == nil,
		"HCATemp": lo.HCATemp == nil})
}

func TestMissingNetdevIsAProblem(t *testing.T) {
	got, err := Reader{Ifaces: []string{"rbnosuch0"}}.Read()
	if err != nil || len(got) != 1 || len(got[0].Problems) != 1 {
		t.Fatalf("Read(rbnosuch0) = %+v, %v; want one problem line", got, err)
	}
}

func assertNil(t *testing.T, iface string, isNil map[string]bool) {
	t.Helper()
	for part, ok := range isNil {
		if !ok {
			t.Errorf("%s: %s not nil, want nil (SKIP)", iface, part)
		}
	}
}

// TestVethLive reads a veth pair this test creates (needs CAP_NET_ADMIN
// and ip(8); skips without them): its statistics name the peer's ifindex,
// and a channel count set by ETHTOOL_SCHANNELS reads back.
func TestVethLive(t *testing.T) {
	a := fmt.Sprintf("rbv%da", os.Getpid()%100000)
	b := a[:len(a)-1] + "b"
	if out, err := exec.Command("ip", "link", "add", a, "type", "veth", "peer", "name", b).CombinedOutput(); err != nil {
		t.Skipf("cannot create a veth pair here (needs CAP_NET_ADMIN and ip): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", a).Run() })
	peer, err := net.InterfaceByName(b)
	if err != nil {
		t.Fatal(err)
	}
	k, err := openKernel()
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	w, err := getWords(k.fd, a, unix.ETHTOOL_GCHANNELS, channelsWords)
	if err != nil {
		t.Fatalf("GCHANNELS %s: %v", a, err)
	}
	w[0], w[5] = unix.ETHTOOL_SCHANNELS, w[1] // rx_count = max_rx
	if err := setWords(k.fd, a, w); err != nil {
		t.Fatalf("SCHANNELS %s rx %d: %v", a, w[1], err)
	}
	got, err := Reader{Ifaces: []string{a}}.Read()
	if err != nil {
		t.Fatal(err)
	}
	checkVeth(t, got[0], uint64(peer.Index), int(w[1]))
}

func checkVeth(t *testing.T, v ethside.Iface, peerIndex uint64, rx int) {
	t.Helper()
	if len(v.Problems) != 0 {
		t.Errorf("%s problems: %v", v.Name, v.Problems)
	}
	if v.Link == nil || v.Link.Up == nil || v.Link.Duplex != "Full" || v.Link.SpeedMbps <= 0 {
		t.Errorf("%s link %+v, want a speed, Full duplex, carrier known", v.Name, v.Link)
	}
	if v.Counters == nil || v.Counters.Values["peer_ifindex"] != peerIndex {
		t.Errorf("%s counters %+v, want peer_ifindex %d", v.Name, v.Counters, peerIndex)
	}
	if v.Channels == nil || v.Channels.RX != rx || v.Channels.Cores <= 0 {
		t.Errorf("%s channels %+v, want rx %d and the host's cores", v.Name, v.Channels, rx)
	}
	assertNil(t, v.Name, map[string]bool{"Module": v.Module == nil, "DCB": v.DCB == nil})
}
