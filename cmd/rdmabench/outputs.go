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
	pushTimeout *time.Duration
}

func addOutputFlags(fs *pflag.FlagSet) outputFlags {
	return outputFlags{
		save:        fs.String("save", "", "also write the run's JSON document (what --json prints) to FILE: a baseline for 'rdmabench compare'"),
		repeat:      fs.Int("repeat", 1, "run the whole measurement N times; figures are the means, every run's are kept so that compare can tell a change from noise"),
		metrics:     fs.String("metrics", "", "write the results in the Prometheus text format to FILE, replaced atomically (node_exporter's textfile collector)"),
		push:        fs.String("push", "", "push the results to the Prometheus Pushgateway at URL; a push replaces the last one of the same job, instance and kind of run (README)"),
		pushJob:     fs.String("push-job", "rdmabench", "the job of the push's grouping key"),
		instance:    fs.String("push-instance", "", "the instance of the push's grouping key (default: this host's name)"),
		pushTimeout: fs.Duration("push-timeout", publish.DefaultPushTimeout, "give up a push after this long"),
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
	if *o.push != "" {
		g, err := render.MetricsGatherer(run, mo)
		instance := *o.instance
		if err == nil && instance == "" {
			instance, err = os.Hostname()
		}
		if err == nil {
			group := publish.Group{Job: *o.pushJob, Labels: map[string]string{"instance": instance, render.RunGroupLabel: render.RunGroup(run)}}
			// Ctrl-C has already ended ctx on an interrupted run: push
			// what was measured all the same, within the push's own bound.
			err = publish.Push(context.WithoutCancel(ctx), *o.push, group, g, *o.pushTimeout)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--push: %w", err))
		}
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
