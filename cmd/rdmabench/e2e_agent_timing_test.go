package main

// Where a fault's seconds went, as Prometheus recorded them: when a fault
// fires late, these say whether the scrapes or the rule evaluations of a
// TCG guest held it, or the agents.

import (
	"fmt"
	"math"
	"time"

	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/internal/promtest"
)

// timing says, over the span from t0: when the first scrape of any agent
// failed (seconds after t0), how many failed, the slowest scrape, and the
// rule evaluations skipped since missedAt0.
func (f *agentFabric) timing(t0 time.Time, span time.Duration, missedAt0 float64) string {
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
	return fmt.Sprintf("scrapes: %s, the slowest %.2f s; rule evaluations skipped: %.0f",
		down, slowest, p.MissedEvaluations()-missedAt0)
}
