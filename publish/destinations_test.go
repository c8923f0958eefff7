package publish

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// testDocument is a document whose series hold one gauge, or fail with
// seriesErr.
func testDocument(seriesErr error) Document {
	return Document{
		JSON:    func(w io.Writer) error { _, err := io.WriteString(w, "{}\n"); return err },
		Metrics: func(w io.Writer) error { _, err := io.WriteString(w, "x 1\n"); return err },
		Series: func() (prometheus.Gatherer, error) {
			if seriesErr != nil {
				return nil, seriesErr
			}
			reg := prometheus.NewRegistry()
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
			g.Set(1)
			reg.MustRegister(g)
			return reg, nil
		},
		Tool: "rdmabench", GroupLabel: "run", Group: "write_bw-s65536-q1",
	}
}

// TestDestinationsTryEach: every destination is tried whatever the
// others did, and the failures are one line, each named by its flag.
func TestDestinationsTryEach(t *testing.T) {
	var pushes atomic.Int32
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pushes.Add(1)
		if strings.Contains(r.URL.Path, "/instance/bad") {
			http.Error(w, "refused", http.StatusInternalServerError)
		}
	}))
	defer gw.Close()
	for _, tc := range []struct {
		name      string
		d         Destinations
		seriesErr error
		want      []string // in the error, in order; none: no error
		pushes    int32
	}{
		{"all fine", Destinations{Save: "s.json", Metrics: "m.prom", Push: gw.URL, PushInstance: "good"}, nil, nil, 1},
		{"metrics and push fail, save kept", Destinations{Save: "s.json", Metrics: "no/such/dir/m.prom", Push: gw.URL, PushInstance: "bad"}, nil,
			[]string{"--metrics: ", "; --push: "}, 1},
		{"no series: both pushes say so", Destinations{Save: "s.json", Push: gw.URL, OTLP: gw.URL + "/v1/metrics", PushInstance: "good"}, errors.New("metrics: duplicate"),
			[]string{"--push: metrics: duplicate", "; --otlp: metrics: duplicate"}, 0},
		{"nothing asked", Destinations{}, nil, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pushes.Store(0)
			sub := t.TempDir()
			if tc.d.Save != "" {
				tc.d.Save = filepath.Join(sub, tc.d.Save)
			}
			if tc.d.Metrics != "" {
				tc.d.Metrics = filepath.Join(sub, tc.d.Metrics)
			}
			tc.d.PushJob, tc.d.PushTimeout = "rdmabench", 5*time.Second
			err := tc.d.Write(context.Background(), testDocument(tc.seriesErr))
			switch {
			case len(tc.want) == 0 && err != nil:
				t.Fatalf("Write: %v", err)
			case len(tc.want) > 0 && err == nil:
				t.Fatalf("Write: no error, want %q", tc.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("error of more than one line: %q", err)
			}
			rest := ""
			if err != nil {
				rest = err.Error()
			}
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error %q lacks %q (in order)", err, w)
				}
				rest = rest[i+len(w):]
			}
			if tc.d.Save != "" {
				if b, err := os.ReadFile(tc.d.Save); err != nil || string(b) != "{}\n" {
					t.Errorf("--save: %q, %v", b, err)
				}
			}
			if got := pushes.Load(); got != tc.pushes {
				t.Errorf("%d pushes reached the gateway, want %d", got, tc.pushes)
			}
		})
	}
}
