package prometheus

// A rule group's rules each read the storage as it is when each one runs,
// and a scrape may land between two of them: that scrape is then newer for
// the later rules than for the earlier ones. The real Prometheus does this
// on every host whose evaluation takes a while (a TCG guest's took over
// a second, and TestTwoNodeAgent saw RNICDown fire for an agent whose host
// was cut off). This test makes it happen at a chosen place, with the
// real server: a remote-read endpoint it must ask for one selector holds
// that rule's evaluation until the victim's failed scrape has landed.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/snappy"
	"google.golang.org/protobuf/encoding/protowire"

	m "github.com/rdmabench/rdmabench/agent/metrics"
	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/internal/promtest"
)

// fakeAgent serves an agent's /metrics: its reach to each peer and its
// start time. Once holding is set, a scrape is held (as a link that went
// down holds it) until release (5 s at most), and then fails with HTTP 500.
type fakeAgent struct {
	addr     string
	mu       sync.Mutex
	reach    map[string]float64 // peer address → 1 or 0
	holding  atomic.Bool
	held     chan time.Time // when the first held scrape came in
	release  chan struct{}  // closed to fail the held scrape
	answered chan struct{}  // closed once it has failed
	once     sync.Once
}

func startFakeAgent(t *testing.T) *fakeAgent {
	a := &fakeAgent{reach: map[string]float64{},
		held: make(chan time.Time, 1), release: make(chan struct{}), answered: make(chan struct{})}
	a.addr = serveLocal(t, a.serve)
	return a
}

// serveLocal serves h on 127.0.0.1 until the test ends; its address.
func serveLocal(t *testing.T, h http.HandlerFunc) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func (a *fakeAgent) set(peer string, v float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reach[peer] = v
}

func (a *fakeAgent) serve(w http.ResponseWriter, _ *http.Request) {
	if a.holding.Load() {
		first := false
		a.once.Do(func() { first = true; a.held <- time.Now() })
		select {
		case <-a.release:
		case <-time.After(5 * time.Second):
		}
		http.Error(w, "failing on purpose", http.StatusInternalServerError)
		if first {
			close(a.answered)
		}
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	local := fmt.Sprintf("%s=%q, %s=\"rxe0\"", m.LabelLocalHost, a.addr, m.LabelLocalDev)
	fmt.Fprintf(w, "# TYPE %s gauge\n", m.PeerReachable)
	for peer, v := range a.reach {
		fmt.Fprintf(w, "%s{%s, %s=%q, %s=%q, %s=\"torA\", %s=\"tor\"} %g\n", m.PeerReachable, local,
			m.LabelPeer, peer, m.LabelPeerHost, peer, m.LabelPeerToR, m.LabelScope, v)
	}
	fmt.Fprintf(w, "# TYPE %s gauge\n%s{%s} %d\n", m.StartTime, m.StartTime, local, time.Now().Add(-time.Hour).Unix())
}

// hook is the remote-read endpoint. Armed with the time a held scrape of
// the victim started, the first request for a plain selector of up (the
// recording of an agent's up, not a range of it) by an evaluation after
// that time fails the held scrape and answers only once that has landed:
// every later rule of that evaluation reads the failed scrape, and the
// earlier ones did not.
type hook struct {
	t      *testing.T
	victim *fakeAgent
	mu     sync.Mutex
	after  time.Time        // armed: the held scrape's start
	prom   *promtest.Server // set when armed
	fired  chan time.Time   // the held evaluation's time
}

// awaitCommit waits (5 s at most) until Prometheus's API shows the
// victim's failed scrape: it has been committed, so every rule that runs
// from now on reads it. The regex matcher keeps the query off the hook.
func (h *hook) awaitCommit() {
	expr := fmt.Sprintf(`up{job=~%q, instance=%q} == 0`, rules.AgentJob, h.victim.addr)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if s, err := h.prom.Query(expr); err == nil && len(s) == 1 {
			return
		}
	}
	h.t.Errorf("the victim's failed scrape is not in Prometheus 5 s after it failed")
}

func (h *hook) arm(after time.Time, p *promtest.Server) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.after, h.prom = after, p
}

// take disarms the hook when an evaluation at eval is one to hold.
func (h *hook) take(eval time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.after.IsZero() || !eval.After(h.after) {
		return false
	}
	h.after = time.Time{}
	return true
}

func (h *hook) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		body, err = snappy.Decode(nil, body)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rr := parseReadRequest(body)
	if eval := time.UnixMilli(int64(rr.endMs)); rr.queries == 1 && rr.rngMs == 0 && h.take(eval) {
		close(h.victim.release)
		<-h.victim.answered
		h.awaitCommit()
		h.fired <- eval
	}
	// ReadResponse{results: one empty QueryResult per query}.
	var resp []byte
	for range rr.queries {
		resp = protowire.AppendTag(resp, 1, protowire.BytesType)
		resp = protowire.AppendBytes(resp, nil)
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Header().Set("Content-Encoding", "snappy")
	w.Write(snappy.Encode(nil, resp))
}

// readRequest is what the hook reads of a ReadRequest: how many queries
// (field 1), and the first one's end (Query field 2: the evaluation's
// time, in milliseconds) and range (its hints, field 4, ReadHints field
// 7: 0 for a selector of the latest sample, 10000 for min_over_time(up[10s])).
type readRequest struct {
	queries      int
	endMs, rngMs uint64
}

func parseReadRequest(b []byte) (rr readRequest) {
	for _, q := range fields(b) {
		if q.num != 1 {
			continue
		}
		if rr.queries++; rr.queries > 1 {
			continue
		}
		for _, f := range fields(q.bytes) {
			switch f.num {
			case 2:
				rr.endMs = f.varint
			case 4:
				for _, h := range fields(f.bytes) {
					if h.num == 7 {
						rr.rngMs = h.varint
					}
				}
			}
		}
	}
	return rr
}

// field is one field of a protobuf message: a varint's value or a
// length-delimited field's bytes.
type field struct {
	num    protowire.Number
	varint uint64
	bytes  []byte
}

// fields splits a message into its fields, as far as it parses.
func fields(b []byte) []field {
	var out []field
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return out
		}
		b = b[n:]
		f := field{num: num}
		switch typ {
		case protowire.VarintType:
			f.varint, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return out
		}
		out = append(out, f)
		b = b[n:]
	}
	return out
}

// RNICDown must not fire for an agent whose scrape fails while its probers
// lose it (its host cut off, the agent killed), wherever in the rule
// group's evaluation that failed scrape lands: here just after the
// recording of its up and before everything the group records after it.
func TestRNICDownNotFiredByAScrapeMidGroup(t *testing.T) {
	r := rules.Default()
	probers := []*fakeAgent{startFakeAgent(t), startFakeAgent(t), startFakeAgent(t)}
	victim := startFakeAgent(t)
	targets := []string{"'" + victim.addr + "'"}
	for _, p := range probers {
		targets = append(targets, "'"+p.addr+"'")
		p.set(victim.addr, 1)
		victim.set(p.addr, 1)
	}
	h := &hook{t: t, victim: victim, fired: make(chan time.Time, 1)}
	hookAddr := serveLocal(t, h.serve)
	ruleFile, err := filepath.Abs(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	// Scraped every four periods and evaluated every one: an evaluation
	// then falls within a scrape held up to its timeout, with three
	// periods to spare for a loaded host.
	p := promtest.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[2]s
rule_files: [%[3]s]
scrape_configs:
  - job_name: %[4]s
    static_configs: [{targets: [%[5]s]}]
remote_read:
  - url: http://%[6]s/read
    read_recent: true
    required_matchers: {__name__: up, job: %[4]s}
`, promtest.Duration(4*r.Period), promtest.Duration(r.Period), ruleFile, rules.AgentJob, strings.Join(targets, ", "), hookAddr), 30*time.Second)

	// The regex matcher keeps these queries away from the hook.
	job := fmt.Sprintf(`{job=~%q}`, rules.AgentJob)
	waitFor(t, p, "all four scraped", `up`+job+` == 1`, 4)
	for _, pr := range probers {
		pr.set(victim.addr, 0)
	}
	// The probers lose it; it still reaches them, so no RNICDown yet.
	waitFor(t, p, "the probers losing the victim", fmt.Sprintf(`%s{peer=%q} == 1`, rules.RecPeerUnreached, victim.addr), 1)
	victim.holding.Store(true)
	select {
	case at := <-victim.held:
		h.arm(at, p)
	case <-time.After(10 * time.Second):
		t.Fatal("the victim was not scraped within 10 s")
	}
	var eval time.Time
	select {
	case eval = <-h.fired:
	case <-time.After(10 * time.Second):
		t.Fatal("no rule asked the hook for up within 10 s")
	}
	waitFor(t, p, "AgentDown for the victim", fmt.Sprintf(`ALERTS{alertname=%q, instance=%q}`, rules.AgentDown, victim.addr), 1)
	for _, s := range p.MustQuery(fmt.Sprintf(`ALERTS{alertname=%q}[1m]`, rules.RNICDown)) {
		t.Errorf("RNICDown fired (%d evaluations) for an agent whose scrape failed mid-group: %v", len(s.Values), s.Metric)
	}
	checkHeldMidGroup(t, p, victim.addr, eval)
}

// checkHeldMidGroup: the place was the one meant. The held evaluation, at
// eval, recorded the victim's up as 1, and its failed scrape is older.
func checkHeldMidGroup(t *testing.T, p *promtest.Server, victim string, eval time.Time) {
	t.Helper()
	evalTS := float64(eval.UnixMilli()) / 1e3
	recorded, failedAt := -1.0, 0.0
	for _, s := range p.MustQuery(fmt.Sprintf(`%s{peer=%q}[1m]`, rules.RecAgentUp, victim)) {
		for _, v := range s.Values {
			if ts, up := promtest.Sample(v); ts == evalTS {
				recorded = up
			}
		}
	}
	for _, s := range p.MustQuery(fmt.Sprintf(`up{job=~%q, instance=%q}[1m]`, rules.AgentJob, victim)) {
		for _, v := range s.Values {
			if ts, up := promtest.Sample(v); up == 0 && failedAt == 0 {
				failedAt = ts
			}
		}
	}
	if recorded != 1 || failedAt == 0 || failedAt >= evalTS {
		t.Errorf("the failed scrape did not land mid-group: the evaluation at %.3f recorded up %v; the failed scrape at %.3f", evalTS, recorded, failedAt)
	}
}

// waitFor waits (20 s at most) until expr has n series.
func waitFor(t *testing.T, p *promtest.Server, what, expr string, n int) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if p.Count(expr) == n {
			return
		}
	}
	t.Fatalf("%s: %s has %d series after 20 s, want %d", what, expr, p.Count(expr), n)
}
