package promtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is an OTLP/HTTP metrics receiver on 127.0.0.1, for shops that
// run an OpenTelemetry collector instead of Prometheus: it decodes what it
// is sent (protobuf, as a collector does) and keeps each request.
type Receiver struct {
	URL string // where to send: …/v1/metrics
	mu  sync.Mutex
	got []*colmetrics.ExportMetricsServiceRequest
}

// OTLPReceiver starts a Receiver, closed when the test ends.
func OTLPReceiver(t testing.TB) *Receiver {
	t.Helper()
	rc := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("receiver on %s, want 127.0.0.1", srv.URL)
	}
	rc.URL = srv.URL + "/v1/metrics"
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
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
	rc.got = append(rc.got, &req)
	rc.mu.Unlock()
	resp, _ := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(resp)
}

// Requests are the requests received so far.
func (rc *Receiver) Requests() []*colmetrics.ExportMetricsServiceRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*colmetrics.ExportMetricsServiceRequest(nil), rc.got...)
}

// Point is one gauge data point as received: its resource's attributes,
// its own, and its value.
type Point struct {
	Resource, Attrs map[string]string
	Value           float64
}

// Gauges are every gauge data point received, by metric name.
func (rc *Receiver) Gauges() map[string][]Point {
	all := map[string][]Point{}
	for _, req := range rc.Requests() {
		for _, rm := range req.GetResourceMetrics() {
			res := attrMap(rm.GetResource().GetAttributes())
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					for _, dp := range m.GetGauge().GetDataPoints() {
						all[m.GetName()] = append(all[m.GetName()], Point{res, attrMap(dp.GetAttributes()), dp.GetAsDouble()})
					}
				}
			}
		}
	}
	return all
}

func attrMap(kv []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, a := range kv {
		m[a.GetKey()] = a.GetValue().GetStringValue()
	}
	return m
}
