package kube

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdmabench/rdmabench/results"
)

func TestSetTaint(t *testing.T) {
	other := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	c := fakeClient(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{other}}})
	ctx := context.Background()
	steps := []struct {
		v       Verdict
		changed bool
		ours    string // our taint's value after, "-" for none
	}{
		{Verdict{Status: results.Healthy}, false, "-"},
		{Verdict{Status: results.Unhealthy, Code: "RB110"}, true, "RB110"},
		{Verdict{Status: results.Unhealthy, Code: "RB110"}, false, "RB110"},
		{Verdict{Status: results.Unhealthy, Code: "RB201"}, true, "RB201"},
		{Verdict{Status: results.CannotCheck, Code: "RB900"}, false, "RB201"},
		{Verdict{Status: results.Healthy}, true, "-"},
	}
	for i, s := range steps {
		changed, err := c.SetTaint(ctx, "n1", s.v)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		n, err := c.Set.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ours, kept := "-", false
		for _, tt := range n.Spec.Taints {
			switch tt.Key {
			case TaintKey:
				ours = tt.Value
			case other.Key:
				kept = true
			}
		}
		if changed != s.changed || ours != s.ours || !kept {
			t.Errorf("step %d (%v %s): changed %v, ours %q, other kept %v; want %v, %q, true", i, s.v.Status, s.v.Code, changed, ours, kept, s.changed, s.ours)
		}
	}
}
