package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
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

// write saves, exports and pushes a finished (or cut short) run; every
// destination is tried, and the errors are joined on one line.
func (o outputFlags) write(ctx context.Context, run *results.Run) error {
	var errs []error
	if *o.save != "" {
		if err := publish.WriteFileAtomic(*o.save, func(w io.Writer) error { return render.JSON(w, run) }); err != nil {
			errs = append(errs, fmt.Errorf("--save: %w", err))
		}
	}
	mo := render.MetricsOptions{SlurmJobID: os.Getenv("SLURM_JOB_ID")}
	if *o.metrics != "" {
		if err := publish.WriteFileAtomic(*o.metrics, func(w io.Writer) error { return render.Metrics(w, run, mo) }); err != nil {
			errs = append(errs, fmt.Errorf("--metrics: %w", err))
		}
	}
	if *o.push != "" || *o.otlp != "" {
		g, gerr := render.MetricsGatherer(run, mo)
		group := render.RunGroup(run)
		var key publish.Group
		if gerr == nil {
			key, gerr = publish.RunGroup(*o.pushJob, *o.instance, render.RunGroupLabel, group)
		}
		// Ctrl-C has already ended ctx on an interrupted run: push what
		// was measured all the same, within the push's own bound.
		ctx := context.WithoutCancel(ctx)
		send := func(flag, url string, push func() error) {
			if url == "" {
				return
			}
			err := gerr
			if err == nil {
				err = push()
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", flag, err))
			}
		}
		send("--push", *o.push, func() error { return publish.Push(ctx, *o.push, key, g, *o.pushTimeout) })
		send("--otlp", *o.otlp, func() error {
			res := map[string]string{"service.name": "rdmabench", "host.name": key.Labels["instance"], "rdmabench." + render.RunGroupLabel: group}
			return publish.PushOTLP(ctx, *o.otlp, res, g, *o.pushTimeout)
		})
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}
