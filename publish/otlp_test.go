package publish

import (
	"context"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/promtest"
)

// The gauges arrive at a receiver that decodes OTLP's protobuf, through the
// SDK's OTLP/HTTP exporter: one gauge per family, its series as data points
// with their labels, under a resource naming the host.
func TestPushOTLP(t *testing.T) {
	rc := promtest.OTLPReceiver(t)
	res := map[string]string{"service.name": "rdmabench", "host.name": "node1"}
	if err := PushOTLP(context.Background(), rc.URL, res, gatherer("write_bw", 42), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(rc.Requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	g := rc.Gauges()
	pts := g["rdmabench_test_value"]
	if len(g) != 1 || len(pts) != 1 {
		t.Fatalf("gauges %v", g)
	}
	p := pts[0]
	if p.Value != 42 || p.Attrs["test"] != "write_bw" || p.Resource["host.name"] != "node1" || p.Resource["service.name"] != "rdmabench" {
		t.Errorf("point %+v", p)
	}
}
