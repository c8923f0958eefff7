package kube

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rdmabench/rdmabench/results"
)

// TaintKey is the taint health puts on an unhealthy node (--taint): pods
// that do not tolerate it are not scheduled there; its value is the fault
// code.
const TaintKey = "rdmabench.io/rdma-unhealthy"

// conflictTries bounds the retries when another writer (the kubelet, the
// node controller) changed the node between our read and our write.
const conflictTries = 5

// SetTaint puts the taint on node while v is unhealthy and takes it off
// when healthy; a node that could not be checked keeps what it has. The
// taints have no merge key, so the whole list is written by a merge patch
// that carries the resourceVersion read: a concurrent change makes it
// fail and it is read again. It needs get and patch on nodes. changed
// says whether the node's taints changed.
func (c *Client) SetTaint(ctx context.Context, node string, v Verdict) (changed bool, err error) {
	if v.Status != results.Healthy && v.Status != results.Unhealthy {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	for try := 0; ; try++ {
		changed, err = c.setTaintOnce(ctx, node, v)
		if !apierrors.IsConflict(err) || try == conflictTries-1 {
			return changed, err
		}
	}
}

func (c *Client) setTaintOnce(ctx context.Context, node string, v Verdict) (bool, error) {
	n, err := c.Set.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("get node %s: %w", node, err)
	}
	taints, changed := withTaint(n.Spec.Taints, v)
	if !changed {
		return false, nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": n.ResourceVersion},
		"spec":     map[string]any{"taints": taints},
	})
	if err != nil {
		return false, err
	}
	if _, err := c.Set.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, fmt.Errorf("patch node %s taints: %w", node, err)
	}
	return true, nil
}

// withTaint is taints with ours put on (unhealthy, value the code) or
// taken off (healthy), and whether that changed anything. It never
// returns nil, so that the patch writes an empty list rather than null.
func withTaint(taints []corev1.Taint, v Verdict) ([]corev1.Taint, bool) {
	out := make([]corev1.Taint, 0, len(taints)+1)
	var had *corev1.Taint
	for i := range taints {
		if taints[i].Key == TaintKey && taints[i].Effect == corev1.TaintEffectNoSchedule {
			had = &taints[i]
			continue
		}
		out = append(out, taints[i])
	}
	if v.Status != results.Unhealthy {
		return out, had != nil
	}
	want := corev1.Taint{Key: TaintKey, Value: string(v.Code), Effect: corev1.TaintEffectNoSchedule}
	if had != nil && had.Value == want.Value {
		return taints, false
	}
	now := metav1.Now()
	want.TimeAdded = &now
	return append(out, want), true
}
