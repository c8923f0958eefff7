package doctor

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/ethside/paste"
)

// pasteFindings are doctor's eth.* findings for one directory of real
// pastes (ethside/paste/testdata, each with its PROVENANCE), as
// `doctor --pastes DIR` judges them.
func pasteFindings(t *testing.T, dir string, env map[string]string) []Finding {
	t.Helper()
	opts := Options{Env: env, Ethernet: paste.Dir(filepath.Join("..", "ethside", "paste", "testdata", dir))}
	opts.defaults()
	h := &host{opts: opts}
	h.readEthernetFirst()
	return checkEthernet(h)
}

// pasteVerdict is what doctor must say of one check of one interface:
// its status, words its value holds, and words it must not (a false
// alarm the real paste once raised).
type pasteVerdict struct {
	subject, check string
	status         Status
	has, hasNot    string
}

// TestRealPasteVerdicts: each real paste's judgements, under
// NCCL_IB_TC=106 (DSCP 26). The WARNs and FAILs listed are all there are:
// any other is a false alarm on a real output.
func TestRealPasteVerdicts(t *testing.T) {
	cases := map[string][]pasteVerdict{
		"healthy": { // mlx5 pastes: PFC and trust right, optics clean
			{"eth4", "eth.pfc", Pass, "priority 3 by the NIC's DSCP table", ""},
			{"eth4", "eth.optics", Pass, "rx -0.12..0.55 dBm over 4 lanes", ""},
			{"eth4", "eth.rings", Pass, "rx 8192 (max 8192)", ""},
		},
		"lossy": { // X710 with no light, PFC off on 3, small rings
			{"net03", "eth.link", Warn, "link down", ""},
			{"net03", "eth.pfc", Fail, "PFC off on priority 3", ""},
			{"net03", "eth.optics", Warn, "alarms on: Laser bias current low alarm", ""},
			{"net03", "eth.rings", Warn, "rx 256 (max 4096)", ""},
		},
		"darklanes": { // QSFP+ SR4, lanes 2-4 dark; its tx thresholds all 0 mW
			{"eth2", "eth.optics", Fail, "rx power lane 2 -40.00 dBm (low alarm -13.51)", "tx power"},
		},
		"cmis": { // QSFP-DD 400G-XDR4: 4 of its 8 channels unused, 70.49 C
			{"eth0", "eth.optics", Warn, "temperature 70.49 °C (high warning 70.00); warnings on: Module temperature high warning", "lane"},
		},
		"pfcoff": { // ConnectX-3 Pro before PFC was set
			{"ens6", "eth.pfc", Fail, "PFC on priorities none", ""},
		},
		"pfcon": { // the same after: PFC on 3, trust not shown
			{"ens6", "eth.pfc", Info, "PFC on priorities 3; the RoCE priority is not known", ""},
		},
		"fec": { // fbnic, no link paste: RS, speed not known
			{"eth0", "eth.fec", Info, "active RS, configured RS", ""},
		},
		"sensorsvirt": { // mlx5's hwmon as a virtual device, no limits
			{"eth0", "eth.temp", Info, "temp1 41.0 °C (no limits shown)", ""},
		},
		"ernic": { // an mlx5 RNIC in a vendor guide: 4 link-down events, no errors
			{"eth0", "eth.flaps", Warn, "link_down_events_phy=4", ""},
			{"eth0", "eth.errors", Pass, "2 counters, all zero", ""},
			{"eth1", "eth.pause", Pass, "all zero", ""},
		},
		"tuning": {
			{"eth2", "eth.coalesce", Pass, "adaptive-rx on, rx-usecs 16", ""},
			{"ens3f0", "eth.channels", Info, "combined 1 (max 64); the core count is not shown", ""},
			{"bottom_2", "eth.temp", Pass, "asic 62.0 °C", ""},
			{"ens785f0np0", "eth.globalpause", Pass, "global pause rx off, tx off (autoneg on)", ""},
		},
	}
	for dir, want := range cases {
		t.Run(dir, func(t *testing.T) {
			assertVerdicts(t, pasteFindings(t, dir, tc106), want)
		})
	}
}

// TestRealPasteSeries: real pairs of readings of one port, judged as
// --pastes DIR --pastes-later DIR/later --watch 10s, with no wait for
// saved outputs. watchprio (mlx5, byteps#179): traffic grew on priority 0
// and `grep prio` kept no pause, discard or error counter, so those checks
// SKIP, never PASS. be2net (netutils-linux#208): jabber_events stayed 2,
// an old count (WARN), not a growing one (FAIL).
func TestRealPasteSeries(t *testing.T) {
	cases := map[string][]pasteVerdict{
		"watchprio": {
			{"enp178s0f0", "eth.errors", Skip, "no link-error counters", ""},
			{"enp178s0f0", "eth.pause", Skip, "no pause or discard counters", ""},
		},
		"be2net": {
			{"eth0", "eth.errors", Warn, "jabber_events=2 (steady over 10s)", "growing"},
			{"eth0", "eth.pause", Pass, "4 counters", ""},
		},
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "ethside", "paste", "testdata", name)
			waits := 0
			opts := Options{Env: tc106, Watch: 10 * time.Second, Wait: func(time.Duration) { waits++ },
				Ethernet: &paste.Series{Dirs: []string{dir, filepath.Join(dir, "later")}}}
			opts.defaults()
			h := &host{opts: opts}
			h.readEthernetFirst()
			got := checkEthernet(h)
			if waits != 0 {
				t.Errorf("waited %d times for saved outputs", waits)
			}
			assertVerdicts(t, got, want)
		})
	}
}

// assertVerdicts: each verdict holds, with a remedy where it WARNs or
// FAILs, and no other WARN or FAIL is there (a false alarm on a real
// output).
func assertVerdicts(t *testing.T, got []Finding, want []pasteVerdict) {
	t.Helper()
	for _, w := range want {
		i := slices.IndexFunc(got, func(f Finding) bool { return f.Subject == w.subject && f.Check == w.check })
		if i < 0 {
			t.Errorf("no %s for %s", w.check, w.subject)
			continue
		}
		f := got[i]
		if f.Status != w.status || !strings.Contains(f.Value, w.has) || (w.hasNot != "" && strings.Contains(f.Value, w.hasNot)) {
			t.Errorf("%s %s: %s %q, want %s with %q without %q", w.subject, w.check, f.Status, f.Value, w.status, w.has, w.hasNot)
		}
		if (f.Status == Warn || f.Status == Fail) && f.Remedy == "" {
			t.Errorf("%s %s: %s without a remedy", w.subject, w.check, f.Status)
		}
	}
	for _, f := range got {
		listed := slices.ContainsFunc(want, func(w pasteVerdict) bool { return w.subject == f.Subject && w.check == f.Check })
		if (f.Status == Warn || f.Status == Fail) && !listed {
			t.Errorf("unexpected %s %s %s: %q", f.Subject, f.Check, f.Status, f.Value)
		}
	}
}
