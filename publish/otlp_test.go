package publish

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP/HTTP collector on 127.0.0.1 that decodes what it is
// sent, as a real one does, and keeps the requests.
type receiver struct {
	mu   sync.Mutex
	reqs []*colmetrics.ExportMetricsServiceRequest
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req colmetrics.ExportMetricsServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil || r.URL.Path != "/v1/metrics" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, &req)
	rc.mu.Unlock()
	resp, _ := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(resp)
}

func attrs(kv []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, a := range kv {
		m[a.GetKey()] = a.GetValue().GetStringValue()
	}
	return m
}

// The gauges arrive at the collector through the SDK's OTLP exporter: one
// gauge per family, its series as data points with their labels, under a
// resource naming the host.
func TestPushOTLP(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("receiver on %s, want 127.0.0.1", srv.URL)
	}
	res := map[string]string{"service.name": "rdmabench", "host.name": "node1"}
	if err := PushOTLP(context.Background(), srv.URL+"/v1/metrics", res, gatherer("write_bw", 42), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if len(rc.reqs) != 1 || len(rc.reqs[0].GetResourceMetrics()) != 1 {
		t.Fatalf("%d requests: %v", len(rc.reqs), rc.reqs)
	}
	rm := rc.reqs[0].GetResourceMetrics()[0]
	if got := attrs(rm.GetResource().GetAttributes()); got["host.name"] != "node1" || got["service.name"] != "rdmabench" {
		t.Errorf("resource %v", got)
	}
	var found int
	for _, sm := range rm.GetScopeMetrics() {
		for _, m := range sm.GetMetrics() {
			if m.GetName() != "rdmabench_test_value" {
				t.Errorf("metric %s", m.GetName())
				continue
			}
			for _, dp := range m.GetGauge().GetDataPoints() {
				found++
				if dp.GetAsDouble() != 42 || attrs(dp.GetAttributes())["test"] != "write_bw" {
					t.Errorf("data point %v", dp)
				}
			}
		}
	}
	if found != 1 {
		t.Errorf("%d data points, want 1", found)
	}
}
