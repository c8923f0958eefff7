package main

// Where a fault's seconds went, as Prometheus recorded them: when a fault
// fires late, these say whether the scrapes or the rule evaluations of a
// TCG guest held it, or the agents.

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	m "github.com/rdmabench/rdmabench/agent/metrics"
	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/internal/promtest"
)

// phaseMark is what a phase's timing counts from: Prometheus's skipped
// evaluations and its own CPU seconds, and node 1's CPU time (/proc/stat,
// in clock ticks) busy and in all.
type phaseMark struct {
	missed, promCPU float64
	busy, total     float64
}

func (f *agentFabric) mark() phaseMark {
	self := f.prom.Self(promtest.SelfMissedEvaluations, promtest.SelfCPUSeconds)
	at := phaseMark{missed: self[0], promCPU: self[1]}
	at.busy, at.total = cpuTicks()
	return at
}

// cpuTicks is this machine's CPU time from /proc/stat's first line: busy
// (all but idle and iowait) and in all; zeros when unreadable.
func cpuTicks() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, field := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseFloat(field, 64)
		if i >= 8 { // guest and guest_nice are in user already
			break
		}
		total += v
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return busy, total
}

// timing says, over the span from t0: when the first scrape of any agent
// failed (seconds after t0), how many failed, the slowest scrape, the
// rule evaluations skipped, node 1's CPU busy, Prometheus's and each
// agent's CPU, and the failed scrapes' errors as sampled.
func (f *agentFabric) timing(t0 time.Time, span time.Duration, at0 phaseMark) string {
	p := f.prom
	job := fmt.Sprintf(`{job=%q}`, rules.AgentJob)
	rng := "[" + promtest.Duration(span+time.Second) + "]"
	start := float64(t0.UnixNano()) / 1e9
	firstDown, failed := math.Inf(1), 0
	if s, err := p.Query(`up` + job + rng); err == nil {
		for _, series := range s {
			for _, v := range series.Values {
				if ts, up := promtest.Sample(v); ts >= start && up == 0 {
					failed++
					firstDown = min(firstDown, ts-start)
				}
			}
		}
	}
	slowest := math.NaN()
	if s, err := p.Query(`max(max_over_time(scrape_duration_seconds` + job + rng + `))`); err == nil && len(s) == 1 {
		_, slowest = promtest.Sample(s[0].Value)
	}
	down := "none failed"
	if failed > 0 {
		down = fmt.Sprintf("the first failed %.1f s in, %d failed", firstDown, failed)
	}
	now := f.mark()
	var agents []string
	if s, err := p.Query(fmt.Sprintf(`increase(%s%s%s)`, m.CPUSeconds, job, rng)); err == nil {
		for _, series := range s {
			_, v := promtest.Sample(series.Value)
			agents = append(agents, fmt.Sprintf("%s %.0f%%", series.Metric["instance"], 100*v/span.Seconds()))
		}
		slices.Sort(agents)
	}
	return fmt.Sprintf("scrapes: %s, the slowest %.2f s; rule evaluations skipped: %.0f; node 1's CPU %.0f%% busy, prometheus %.0f%% of a CPU, agents %s; failed scrapes sampled: %s",
		down, slowest, now.missed-at0.missed, 100*(now.busy-at0.busy)/max(1, now.total-at0.total),
		100*(now.promCPU-at0.promCPU)/span.Seconds(), strings.Join(agents, ", "), f.scrapeErrs.in(t0, span))
}

// scrapeErrors samples Prometheus's targets every second for the whole
// test and keeps each failed scrape's error by its time: Prometheus keeps
// no error in its series, only up.
type scrapeErrors struct {
	mu   sync.Mutex
	seen map[string]bool // instance and lastScrape, each scrape once
	errs []scrapeError
}

type scrapeError struct {
	at             time.Time
	instance, what string
}

// sampleScrapeErrors starts the sampler; the test's cleanup stops and
// joins it.
func sampleScrapeErrors(t testing.TB, p *promtest.Server) *scrapeErrors {
	s := &scrapeErrors{seen: map[string]bool{}}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			s.take(p.Get("/api/v1/targets?state=active"))
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return s
}

func (s *scrapeErrors) take(body string) {
	var resp struct {
		Data struct {
			ActiveTargets []struct {
				Labels     map[string]string `json:"labels"`
				Health     string            `json:"health"`
				LastError  string            `json:"lastError"`
				LastScrape time.Time         `json:"lastScrape"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if json.Unmarshal([]byte(body), &resp) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tg := range resp.Data.ActiveTargets {
		key := tg.Labels["instance"] + " " + tg.LastScrape.String()
		if tg.Health != "down" || s.seen[key] {
			continue
		}
		s.seen[key] = true
		s.errs = append(s.errs, scrapeError{at: tg.LastScrape, instance: tg.Labels["instance"], what: tg.LastError})
	}
}

// in says which agents' scrapes failed from t0 over span, and why, as
// sampled: "instance: error ×n (first s in)", most first.
func (s *scrapeErrors) in(t0 time.Time, span time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	type group struct {
		n     int
		first time.Duration
	}
	groups := map[string]*group{}
	for _, e := range s.errs {
		if e.at.Before(t0) || e.at.After(t0.Add(span)) {
			continue
		}
		k := e.instance + ": " + e.what
		if groups[k] == nil {
			groups[k] = &group{first: e.at.Sub(t0)}
		}
		groups[k].n++
	}
	keys := slices.Collect(maps.Keys(groups))
	slices.SortFunc(keys, func(a, b string) int { return groups[b].n - groups[a].n })
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s ×%d (first %.1f s in)", k, groups[k].n, groups[k].first.Seconds()))
	}
	if len(out) == 0 {
		return "none sampled"
	}
	return strings.Join(out, "; ")
}
