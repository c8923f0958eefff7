package kubetest

import (
	"testing"
	"time"
)

// MarkPodDone posts what a kubelet posts when the pod's one container
// exited with code: phase Succeeded (0) or Failed, and the container's
// terminated state. The Job controller counts the index done or failed
// from it.
func (c *Cluster) MarkPodDone(t testing.TB, namespace, pod, container string, code int) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339)
	phase, reason := "Succeeded", "Completed"
	if code != 0 {
		phase, reason = "Failed", "Error"
	}
	c.patchStatus(t, "pod", pod, namespace, map[string]any{"status": map[string]any{
		"phase": phase,
		"conditions": []map[string]string{
			{"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now},
			{"type": "ContainersReady", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now},
		},
		"containerStatuses": []map[string]any{{
			"name": container, "ready": false, "restartCount": 0, "image": "rdmabench", "imageID": "",
			"state": map[string]any{"terminated": map[string]any{"exitCode": code, "reason": reason, "startedAt": now, "finishedAt": now}},
		}},
	}})
}
