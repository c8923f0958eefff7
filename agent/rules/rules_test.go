package rules

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every threshold and window reaches the rule file: a field the writer
// forgot would leave the file and the simulation apart.
func TestEveryFieldWritten(t *testing.T) {
	write := func(r Rules) string {
		var b bytes.Buffer
		if err := r.WriteYAML(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	base := Default()
	want := write(base)
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		r := Default()
		f := reflect.ValueOf(&r).Elem().Field(i)
		switch f.Interface().(type) {
		case time.Duration:
			f.SetInt(f.Int() * 2)
		case float64:
			f.SetFloat(f.Float() / 2)
		case int:
			f.SetInt(f.Int() + 1)
		default:
			t.Fatalf("field %s of a type the test does not change", v.Type().Field(i).Name)
		}
		if write(r) == want {
			t.Errorf("changing %s does not change the rule file", v.Type().Field(i).Name)
		}
	}
}

// AgentDown is up == 0 held for AgentDownFor: the file's for: is the Go
// condition's bound, and a killed agent or a dead host (its scrape failed)
// never reads as an RNIC however its probers see it.
func TestAgentDownMatchesFile(t *testing.T) {
	r := Default()
	var b bytes.Buffer
	r.WriteYAML(&b)
	want := "rdmabench_agent:agent_up == 0\n        for: " + promDuration(r.AgentDownFor) + "\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("the file has no %q", want)
	}
	if r.AgentDownFires(r.AgentDownFor-time.Millisecond) || !r.AgentDownFires(r.AgentDownFor) {
		t.Errorf("AgentDownFires is not >= %v", r.AgentDownFor)
	}
	// The peer's own view: a dead RNIC reaches none of its peers; one
	// peer of a hundred reached is a working RNIC; an agent down, back
	// or started within the startup window has no view yet; not
	// scraped, the probers'.
	long, w := 24*time.Hour, r.StartupWindow
	for _, c := range []struct {
		own  OwnView
		want bool
	}{
		{OwnView{Scraped: true, UpFor: long, Reach: 0}, true},
		{OwnView{Scraped: true, UpFor: long, Reach: 0.01}, false},
		{OwnView{Scraped: true, UpFor: 0, Reach: math.NaN()}, false},
		{OwnView{Scraped: true, UpFor: w - time.Millisecond, Reach: 0}, false},
		{OwnView{Scraped: true, UpFor: w, Reach: 0}, true},
		{OwnView{}, true},
	} {
		if got := r.RNICDownFires(10, 10, c.own); got != c.want {
			t.Errorf("RNICDownFires(10 of 10, %+v) = %v, want %v", c.own, got, c.want)
		}
	}
	for _, clause := range []string{
		`unless on (peer) (label_replace(avg by (instance) (rdmabench_agent_peer_reachable{job="rdmabench-agent"}), "peer", "$1", "instance", "(.*)") > 0)` + "\n",
		`unless on (peer) (label_replace(min_over_time(up{job="rdmabench-agent"}[` + promDuration(w) + `]), "peer", "$1", "instance", "(.*)") == 0)` + "\n",
		`unless on (peer) (time() - label_replace(max by (instance) (rdmabench_agent_start_time_seconds{job="rdmabench-agent"}), "peer", "$1", "instance", "(.*)") < ` + num(w.Seconds()) + ")\n",
	} {
		if !strings.Contains(b.String(), clause) {
			t.Errorf("the file's RNICDown has no %q", clause)
		}
	}
	if r.PathLossFires(1, 1, 0, true) || !strings.Contains(b.String(), "unless on (instance) (min_over_time(rdmabench_agent:agent_up:max3s[2m]) == 0)") {
		t.Error("PathLoss does not leave out a prober that was down in its settle window")
	}
	if !strings.Contains(b.String(), `up{job="`+AgentJob+`"}`) {
		t.Errorf("the file does not read the up of job %s", AgentJob)
	}
}

func TestPromDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", time.Second: "1s", 90 * time.Second: "90s", 5 * time.Minute: "5m", 2 * time.Hour: "2h", 1500 * time.Millisecond: "1500ms"} {
		if got := promDuration(d); got != want {
			t.Errorf("%v: %s, want %s", d, got, want)
		}
	}
}

// Each comparison of the rule file, at its own threshold, agrees with the
// Go condition: >= fires at the threshold, > and < do not, so the file and
// the simulation draw the line in the same place.
func TestConditionsMatchFile(t *testing.T) {
	r := Default()
	var b bytes.Buffer
	r.WriteYAML(&b)
	file := b.String()
	type cmp struct {
		text   string               // as the file has it
		at     func(v float64) bool // the Go condition with that term at v, the others true
		strict bool                 // false at v itself (>, <, unless >=)
		below  bool                 // fires below v (<, unless >=)
	}
	ms := time.Duration(float64(time.Second) * 1e-3)
	cases := map[Alert][]cmp{
		RNICDown: {
			{"rdmabench_agent:peer_unreached:ratio{scope=\"tor\"} >= 0.5", func(v float64) bool { return r.RNICDownFires(int(v*100), 100, OwnView{}) }, false, false},
			{"rdmabench_agent:peer_probers:count{scope=\"tor\"} >= 3", func(v float64) bool { return r.RNICDownFires(int(v), int(v), OwnView{}) }, false, false},
		},
		PathLoss: {
			{"rdmabench_agent:pair_loss:ratio_rate1m >= 0.05", func(v float64) bool { return r.PathLossFires(v, 1, 0, false) }, false, false},
			{"(min_over_time(rdmabench_agent:local_reach:ratio[2m]) >= 0.5)", func(v float64) bool { return r.PathLossFires(1, v, 0, false) }, false, false},
			{"(max_over_time(rdmabench_agent:peer_unreached_all:ratio[2m]) < 0.5)", func(v float64) bool { return r.PathLossFires(1, 1, v, false) }, true, true},
		},
		HostDelay: {
			{"(rdmabench_agent:pair_host_delay_seconds:p50_rate1m) > 0.001", func(v float64) bool { return r.HostDelayFires(time.Duration(v*float64(time.Second)), 10) }, true, false},
			{"count by (peer) (rdmabench_agent:pair_host_delay_seconds:p50_rate1m) >= 3", func(v float64) bool { return r.HostDelayFires(time.Second, int(v)) }, false, false},
		},
		LatencyRegression: {
			{"p50_rate5m > 1.5 * rdmabench_agent:pair_network_rtt_seconds:p50_baseline", func(v float64) bool { return r.LatencyRegressionFires(time.Duration(v*float64(ms)), ms) }, true, false},
			{"p50_baseline > 2e-05", func(v float64) bool {
				return r.LatencyRegressionFires(time.Duration(v*float64(time.Second))+time.Microsecond, time.Microsecond)
			}, true, false},
		},
	}
	thresholds := map[string]float64{">= 0.5": 0.5, ">= 3": 3, ">= 0.05": 0.05, "< 0.5": 0.5, "> 0.001": 0.001, "> 1.5 *": 1.5, "> 2e-05": 2e-5}
	for _, a := range Alerts {
		for _, c := range cases[a] {
			if !strings.Contains(file, c.text) {
				t.Errorf("%s: the file has no %q", a, c.text)
				continue
			}
			var v float64
			for op, th := range thresholds {
				if strings.Contains(c.text, op) {
					v = th
				}
			}
			below, above := c.at(v*0.999), c.at(v*1.001)
			if c.below {
				below, above = above, below // fires below the threshold
			}
			if below || !above || c.at(v) == c.strict {
				t.Errorf("%s: %q: the Go condition is %v just past, %v at, %v short of %g", a, c.text, above, c.at(v), below, v)
			}
		}
	}
}
