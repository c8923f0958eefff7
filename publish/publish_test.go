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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rdmabench.prom")
	os.WriteFile(path, []byte("old\n"), 0o644)
	// A failed write leaves the old file and no temporary file behind.
	err := WriteFileAtomic(path, func(w io.Writer) error {
		io.WriteString(w, "half")
		return errors.New("boom")
	})
	if err == nil {
		t.Fatal("no error")
	}
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Errorf("file after a failed write: %q", b)
	}
	if err := WriteFileAtomic(path, func(w io.Writer) error { _, err := io.WriteString(w, "new\n"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new\n" {
		t.Errorf("file %q", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 (the collector must read it)", st.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files left in the directory, want 1", len(ents))
	}
	if err := WriteFileAtomic(filepath.Join(dir, "no", "such", "dir"), func(io.Writer) error { return nil }); err == nil {
		t.Error("a missing directory was not reported")
	}
}

func gatherer() prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "rdmabench_test_value", Help: "test"})
	g.Set(42)
	reg.MustRegister(g)
	return reg
}

func TestPush(t *testing.T) {
	var method, path, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		method, path, body = r.Method, r.URL.Path, string(b)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server on %s, want 127.0.0.1", srv.URL)
	}
	if err := Push(context.Background(), srv.URL, "rdmabench", gatherer(), time.Second); err != nil {
		t.Fatal(err)
	}
	if method != http.MethodPut || path != "/metrics/job/rdmabench" || len(body) == 0 {
		t.Errorf("%s %s with %d bytes", method, path, len(body))
	}
}

func TestPushFailures(t *testing.T) {
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusBadRequest)
	}))
	defer refuse.Close()
	block := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer hang.Close()
	defer close(block) // runs before hang.Close, which waits for handlers
	tests := []struct{ name, url, want string }{
		{"refused", refuse.URL, "400"},
		{"hangs", hang.URL, "no answer within"},
		{"no URL", "", "no Pushgateway URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			err := Push(context.Background(), tt.url, "rdmabench", gatherer(), 300*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want %q", err, tt.want)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v: the timeout did not bound it", d)
			}
		})
	}
}
