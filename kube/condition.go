package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdmabench/rdmabench/results"
)

// ConditionType is health's node condition. As in the Node Problem
// Detector's contract a condition names a problem: True is unhealthy,
// False healthy, Unknown could not check.
const ConditionType corev1.NodeConditionType = "RDMAUnhealthy"

// Reasons of the condition when no fault code applies.
const (
	ReasonHealthy     = "RDMAHealthy"
	ReasonCannotCheck = "CannotCheck"
)

// maxMessage bounds the condition's message: a drain reason of many faults
// must not bloat every Node object the scheduler watches.
const maxMessage = 1024

// Verdict is what health found, as a condition says it.
type Verdict struct {
	Status  results.HealthStatus
	Code    results.HealthCode // the first fault's (or unchecked's) code, "" when healthy
	Message string             // the drain reason line
}

// Condition is the node condition for v, heard at now; lastTransitionTime
// is now only when the status differs from the node's condition before.
func (v Verdict) Condition(before *corev1.NodeCondition, now time.Time) corev1.NodeCondition {
	c := corev1.NodeCondition{Type: ConditionType, LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
	switch v.Status {
	case results.Healthy:
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, ReasonHealthy, "rdmabench health: healthy"
	case results.Unhealthy:
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, string(v.Code), v.Message
	default:
		c.Status, c.Reason, c.Message = corev1.ConditionUnknown, ReasonCannotCheck, v.Message
		if v.Code != "" {
			c.Reason = string(v.Code)
		}
	}
	if len(c.Message) > maxMessage {
		c.Message = c.Message[:maxMessage-3] + "..."
	}
	if before != nil && before.Status == c.Status && !before.LastTransitionTime.IsZero() {
		c.LastTransitionTime = before.LastTransitionTime
	}
	return c
}

// SetCondition writes v as node's RDMAUnhealthy condition: a strategic
// merge patch of the status, keyed by type, so that the kubelet's and
// other detectors' conditions stay as they are. It needs get on nodes and
// patch on nodes/status, nothing more.
func (c *Client) SetCondition(ctx context.Context, node string, v Verdict, now time.Time) (corev1.NodeCondition, error) {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	n, err := c.Set.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return corev1.NodeCondition{}, fmt.Errorf("get node %s: %w", node, err)
	}
	cond := v.Condition(findCondition(n.Status.Conditions, ConditionType), now)
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return cond, err
	}
	if _, err := c.Set.CoreV1().Nodes().PatchStatus(ctx, node, patch); err != nil {
		return cond, fmt.Errorf("patch node %s status: %w", node, err)
	}
	return cond, nil
}

func findCondition(cs []corev1.NodeCondition, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}
