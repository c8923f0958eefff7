// Package publish delivers rendered results where others read them: a file
// replaced atomically (node_exporter's textfile collector must never read
// half a file), and a Prometheus Pushgateway.
package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
)

// WriteFileAtomic writes what write produces to a temporary file in path's
// directory, then renames it over path: readers see the old file or the new
// one, never a part. The rename needs both on one file system, hence the
// same directory rather than /tmp.
//
// Its errors name path, never the hidden temporary file.
func WriteFileAtomic(path string, write func(io.Writer) error) (err error) {
	if st, serr := os.Stat(path); serr == nil && st.IsDir() {
		return fmt.Errorf("write %s: is a directory; give a file name", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %s", path, errText(err))
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	// CreateTemp makes 0600; the collector (often another user) must read it.
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %s", path, errText(err))
	}
	return nil
}

// DefaultPushTimeout bounds a push: a Pushgateway that does not answer must
// not hold up the benchmark's exit.
const DefaultPushTimeout = 10 * time.Second

// Group is where a push lands on a Pushgateway: the job and the grouping
// labels besides it. A push replaces the metrics of exactly that group and
// leaves every other alone. The Pushgateway adds the labels to every series
// it holds for the group, so no series pushed may carry one of them.
type Group struct {
	Job    string
	Labels map[string]string
}

// RunGroup is where one kind of run of one host lands: job, the instance
// (this host's name when empty) and the run's kind under label, so that
// pushes of other hosts and other kinds of run never replace it.
func RunGroup(job, instance, label, kind string) (Group, error) {
	if instance == "" {
		var err error
		if instance, err = os.Hostname(); err != nil {
			return Group{}, fmt.Errorf("the push's instance (this host's name): %w", err)
		}
	}
	return Group{Job: job, Labels: map[string]string{"instance": instance, label: kind}}, nil
}

// Push replaces the metrics of group on the Pushgateway at url with g's
// (PUT, as push.Pusher.Push does), within timeout.
func Push(ctx context.Context, url string, group Group, g prometheus.Gatherer, timeout time.Duration) error {
	if url == "" {
		return errors.New("push: no Pushgateway URL")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: timeout}
	p := push.New(url, group.Job).Gatherer(g).Client(client)
	for name, value := range group.Labels {
		p = p.Grouping(name, value)
	}
	if err := p.PushContext(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("push to %s: no answer within %v", url, timeout)
		}
		return fmt.Errorf("push to %s: %w", url, err)
	}
	return nil
}
