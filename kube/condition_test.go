package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rdmabench/rdmabench/results"
)

// fakeClient is a client of client-go's object tracker: the patch and
// list logic, not the API server's (internal/kubetest has the real one).
func fakeClient(objs ...runtime.Object) *Client {
	return &Client{Set: fake.NewClientset(objs...), Namespace: "default", From: "test"}
}

func TestConditionOfVerdict(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	long := strings.Repeat("x", 3000)
	cases := []struct {
		name           string
		v              Verdict
		before         *corev1.NodeCondition
		status         corev1.ConditionStatus
		reason         string
		transitionedAt time.Time
	}{
		{"healthy, first", Verdict{Status: results.Healthy}, nil, corev1.ConditionFalse, ReasonHealthy, t1},
		{"unhealthy, code", Verdict{Status: results.Unhealthy, Code: "RB195", Message: "m"}, nil, corev1.ConditionTrue, "RB195", t1},
		{"cannot check, code", Verdict{Status: results.CannotCheck, Code: "RB900"}, nil, corev1.ConditionUnknown, "RB900", t1},
		{"cannot check, none", Verdict{Status: results.CannotCheck}, nil, corev1.ConditionUnknown, ReasonCannotCheck, t1},
		{"same status keeps transition", Verdict{Status: results.Unhealthy, Code: "RB201"},
			&corev1.NodeCondition{Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}, corev1.ConditionTrue, "RB201", t0},
		{"new status moves transition", Verdict{Status: results.Healthy},
			&corev1.NodeCondition{Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}, corev1.ConditionFalse, ReasonHealthy, t1},
		{"long message cut", Verdict{Status: results.Unhealthy, Code: "RB1", Message: long}, nil, corev1.ConditionTrue, "RB1", t1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.v.Condition(c.before, t1)
			if got.Type != ConditionType || got.Status != c.status || got.Reason != c.reason {
				t.Errorf("got %s=%s reason %s, want %s reason %s", got.Type, got.Status, got.Reason, c.status, c.reason)
			}
			if !got.LastTransitionTime.Time.Equal(c.transitionedAt) || !got.LastHeartbeatTime.Time.Equal(t1) {
				t.Errorf("transition %v heartbeat %v, want %v and %v", got.LastTransitionTime, got.LastHeartbeatTime, c.transitionedAt, t1)
			}
			if len(got.Message) > maxMessage {
				t.Errorf("message of %d bytes, want at most %d", len(got.Message), maxMessage)
			}
		})
	}
}

// TestSetConditionKeepsOthers: the patch is keyed by type, so the kubelet's
// Ready condition survives, and a second write keeps the transition time.
func TestSetConditionKeepsOthers(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}
	c := fakeClient(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}})
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Second)
	bad := Verdict{Status: results.Unhealthy, Code: "RB110", Message: "rdmabench: RB110 mlx5_0 port down"}
	if _, err := c.SetCondition(ctx, "n1", bad, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetCondition(ctx, "n1", bad, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Set.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := findCondition(n.Status.Conditions, corev1.NodeReady); got == nil || got.Reason != "KubeletReady" {
		t.Errorf("the kubelet's Ready condition was lost: %+v", n.Status.Conditions)
	}
	got := findCondition(n.Status.Conditions, ConditionType)
	if got == nil || got.Status != corev1.ConditionTrue || got.Message != bad.Message {
		t.Fatalf("condition %+v", got)
	}
	if !got.LastTransitionTime.Time.Equal(t0) || !got.LastHeartbeatTime.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("transition %v heartbeat %v: want the first write's and the second's", got.LastTransitionTime, got.LastHeartbeatTime)
	}
	if _, err := c.SetCondition(ctx, "absent", bad, t0); err == nil || !strings.Contains(err.Error(), "get node absent") {
		t.Errorf("a node that does not exist: %v", err)
	}
}
