package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/internal/durflag"
	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

// maxRepeat bounds --repeat: enough for any confidence interval, and a typo
// (--repeat 10000) does not hold the device for a day.
const maxRepeat = 1000

// outputFlags are where a test's results go besides stdout.
type outputFlags struct {
	save        *string
	repeat      *int
	metrics     *string
	push        *string
	pushJob     *string
	instance    *string // --push-instance
	otlp        *string
	pushTimeout *time.Duration
}

func addOutputFlags(fs *pflag.FlagSet) outputFlags {
	return outputFlags{
		save:        fs.String("save", "", "also write the run's JSON document (what --json prints) to FILE: a baseline for 'rdmabench compare'"),
		repeat:      fs.Int("repeat", 1, "run the whole measurement N times; figures are the means, every run's are kept so that compare can tell a change from noise"),
		metrics:     fs.String("metrics", "", "write the results in the Prometheus text format to FILE, replaced atomically (node_exporter's textfile collector)"),
		push:        fs.String("push", "", "push the results to the Prometheus Pushgateway at URL; a push replaces the last one of the same job, instance and kind of run (docs/metrics.md)"),
		pushJob:     fs.String("push-job", "rdmabench", "the job of the push's grouping key"),
		instance:    fs.String("push-instance", "", "the instance of the push's grouping key (default: this host's name)"),
		otlp:        fs.String("otlp", "", "send the results to the OpenTelemetry collector at URL (OTLP over HTTP, such as http://collector:4318/v1/metrics)"),
		pushTimeout: durflag.P(fs, "push-timeout", "", publish.DefaultPushTimeout, "give up a push (Pushgateway or OTLP) after this long"),
	}
}

func (o outputFlags) validate() error {
	if *o.repeat < 1 || *o.repeat > maxRepeat {
		return fmt.Errorf("--repeat %d outside 1..%d", *o.repeat, maxRepeat)
	}
	if *o.pushTimeout <= 0 {
		return fmt.Errorf("--push-timeout %v must be positive", *o.pushTimeout)
	}
	if *o.pushJob == "" {
		return errors.New("--push-job must not be empty")
	}
	return nil
}

// write saves, exports and pushes a finished (or cut short) run
// (publish.Destinations.Write: every destination tried, one line of
// errors).
func (o outputFlags) write(ctx context.Context, run *results.Run) error {
	d := publish.Destinations{Save: *o.save, Metrics: *o.metrics, Push: *o.push, OTLP: *o.otlp,
		PushJob: *o.pushJob, PushInstance: *o.instance, PushTimeout: *o.pushTimeout}
	return d.Write(ctx, render.RunDocument(run, render.MetricsOptions{SlurmJobID: os.Getenv("SLURM_JOB_ID")}))
}
