package publish

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
)

// PushOTLP sends g's gauges once to an OpenTelemetry collector at url (OTLP
// over HTTP, protobuf: http://collector:4318/v1/metrics), within timeout,
// through the OpenTelemetry SDK: each family an OTel gauge of that name,
// each series a data point whose attributes are its labels, under a
// resource with attrs (service.name, host.name ...). Only gauges are sent:
// every figure rdmabench exports is one.
func PushOTLP(ctx context.Context, url string, attrs map[string]string, g prometheus.Gatherer, timeout time.Duration) error {
	if url == "" {
		return errors.New("otlp: no collector URL")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rm, err := resourceMetrics(ctx, attrs, g)
	if err != nil {
		return fmt.Errorf("otlp: %w", err)
	}
	// No retries: a collector that refuses now is reported now, and the
	// timeout bounds the one try.
	exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(url), otlpmetrichttp.WithTimeout(timeout),
		otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}))
	if err != nil {
		return fmt.Errorf("otlp to %s: %w", url, err)
	}
	defer exp.Shutdown(context.WithoutCancel(ctx))
	if err := exp.Export(ctx, rm); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("otlp to %s: no answer within %v", url, timeout)
		}
		return fmt.Errorf("otlp to %s: %w", url, err)
	}
	return nil
}

// resourceMetrics records g's gauges with the SDK and collects them, as a
// periodic reader would on its one tick.
func resourceMetrics(ctx context.Context, attrs map[string]string, g prometheus.Gatherer) (*metricdata.ResourceMetrics, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	var kv []attribute.KeyValue
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		kv = append(kv, attribute.String(k, attrs[k]))
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(resource.NewSchemaless(kv...)))
	defer mp.Shutdown(context.WithoutCancel(ctx))
	meter := mp.Meter("github.com/rdmabench/rdmabench")
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_GAUGE {
			return nil, fmt.Errorf("%s is a %v, not a gauge", mf.GetName(), mf.GetType())
		}
		gauge, err := meter.Float64Gauge(mf.GetName(), metric.WithDescription(mf.GetHelp()))
		if err != nil {
			return nil, err
		}
		for _, m := range mf.GetMetric() {
			var labels []attribute.KeyValue
			for _, l := range m.GetLabel() {
				if l.GetValue() != "" { // Prometheus reads an empty label as none
					labels = append(labels, attribute.String(l.GetName(), l.GetValue()))
				}
			}
			gauge.Record(ctx, m.GetGauge().GetValue(), metric.WithAttributes(labels...))
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return nil, err
	}
	return &rm, nil
}
