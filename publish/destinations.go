package publish

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Document is a result as every command's outputs write it, whichever
// command made it: its JSON document (--save), its series in the
// Prometheus text format (--metrics) and as a registry (--push, --otlp),
// and the kind of run that keys a push. render makes one of each result.
type Document struct {
	JSON    func(io.Writer) error
	Metrics func(io.Writer) error
	Series  func() (prometheus.Gatherer, error)
	// Tool is the OTLP push's service.name; GroupLabel and Group the
	// grouping label that keeps one kind of run apart (RunGroup).
	Tool, GroupLabel, Group string
}

// Destinations are where a command writes a result besides stdout; the
// empty ones are not written.
type Destinations struct {
	Save, Metrics         string // files, replaced atomically
	Push, OTLP            string // a Pushgateway's URL, an OTLP/HTTP collector's
	PushJob, PushInstance string
	PushTimeout           time.Duration
}

// Write writes doc to every destination given. Each is tried whatever
// the others did, so that one unreachable gateway does not lose the
// saved file; the errors, each named by its flag, are one line.
// The pushes go ahead after Ctrl-C all the same (ctx's cancel is not
// theirs; PushTimeout bounds each): an interrupted run's figures are
// worth keeping.
func (d Destinations) Write(ctx context.Context, doc Document) error {
	var errs []string
	note := func(flag string, err error) {
		if err != nil {
			// A gateway's reply may end in a newline: still one line.
			msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", " ")
			errs = append(errs, flag+": "+msg)
		}
	}
	if d.Save != "" {
		note("--save", WriteFileAtomic(d.Save, doc.JSON))
	}
	if d.Metrics != "" {
		note("--metrics", WriteFileAtomic(d.Metrics, doc.Metrics))
	}
	if d.Push != "" || d.OTLP != "" {
		d.push(context.WithoutCancel(ctx), doc, note)
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}

// push sends doc's series to the Pushgateway and the OTLP collector given.
func (d Destinations) push(ctx context.Context, doc Document, note func(string, error)) {
	g, err := doc.Series()
	var key Group
	if err == nil {
		key, err = RunGroup(d.PushJob, d.PushInstance, doc.GroupLabel, doc.Group)
	}
	if d.Push != "" {
		if err == nil {
			note("--push", Push(ctx, d.Push, key, g, d.PushTimeout))
		} else {
			note("--push", err)
		}
	}
	if d.OTLP != "" {
		if err == nil {
			attrs := map[string]string{"service.name": doc.Tool, "host.name": key.Labels["instance"], doc.Tool + "." + doc.GroupLabel: doc.Group}
			note("--otlp", PushOTLP(ctx, d.OTLP, attrs, g, d.PushTimeout))
		} else {
			note("--otlp", err)
		}
	}
}
