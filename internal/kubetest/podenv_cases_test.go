package kubetest

func podCases() []podCase {
	return []podCase{
		{name: "as the Job controller made it, not run", edit: func(map[string]any) {}, wantErr: "env POD_IP: fieldRef status.podIP"},
		{name: "running", edit: running, want: map[string]string{
			"JOB_COMPLETION_INDEX": "0", "HOSTNAME": "mesh-0", "NODE_NAME": "node-a",
			"POD_IP": "198.18.0.10", "RDMABENCH_WORLD_SIZE": "3", "RDMABENCH_SUBDOMAIN": "mesh"}},
		{name: "not bound", edit: both(running, func(p map[string]any) { delete(spec(p), "nodeName") }),
			wantErr: "env NODE_NAME: fieldRef spec.nodeName: the pod is not bound"},
		{name: "no spec.hostname: the pod's name", edit: both(running, func(p map[string]any) {
			delete(spec(p), "hostname")
			p["metadata"].(map[string]any)["name"] = "mesh-0-abcde"
		}), want: map[string]string{"HOSTNAME": "mesh-0-abcde"}},
		{name: "long pod name cut to 63", edit: both(running, func(p map[string]any) {
			delete(spec(p), "hostname")
			p["metadata"].(map[string]any)["name"] = "a23456789-123456789-123456789-123456789-123456789-123456789-12-x"
		}), want: map[string]string{"HOSTNAME": "a23456789-123456789-123456789-123456789-123456789-123456789-12"}},
		{name: "hostNetwork: the node's hostname", edit: both(running, func(p map[string]any) { spec(p)["hostNetwork"] = true }),
			want: map[string]string{"HOSTNAME": "node-a"}},
		{name: "the pod's own HOSTNAME wins", edit: both(running, func(p map[string]any) {
			addEnv(p, `{"name":"HOSTNAME","value":"mine"}`)
		}), want: map[string]string{"HOSTNAME": "mine"}},
		{name: "$(VAR) from earlier variables only", edit: both(running, func(p map[string]any) {
			addEnv(p, `{"name":"A","value":"$(RDMABENCH_WORLD_SIZE)-$(LATER)-$(HOSTNAME)-$(JOB_COMPLETION_INDEX)"}`,
				`{"name":"LATER","value":"x"}`, `{"name":"EMPTY","value":""}`)
		}), want: map[string]string{"A": "3-$(LATER)-$(HOSTNAME)-0", "LATER": "x", "EMPTY": ""}},
		{name: "labels, annotations, uid, service account", edit: both(running, func(p map[string]any) {
			addEnv(p, `{"name":"L","valueFrom":{"fieldRef":{"fieldPath":"metadata.labels['batch.kubernetes.io/job-completion-index']"}}}`,
				`{"name":"NOPE","valueFrom":{"fieldRef":{"fieldPath":"metadata.annotations['no.such/key']"}}}`,
				`{"name":"NS","valueFrom":{"fieldRef":{"fieldPath":"metadata.namespace"}}}`,
				`{"name":"SA","valueFrom":{"fieldRef":{"fieldPath":"spec.serviceAccountName"}}}`,
				`{"name":"IPS","valueFrom":{"fieldRef":{"fieldPath":"status.hostIPs"}}}`,
				`{"name":"HIP","valueFrom":{"fieldRef":{"fieldPath":"status.hostIP"}}}`)
		}), want: map[string]string{"L": "0", "NOPE": "", "NS": "kubetest", "SA": "default",
			"IPS": "198.18.1.1,fd00::1", "HIP": "198.18.1.1"}},
		{name: "a field the kubelet does not resolve", edit: both(running, func(p map[string]any) {
			addEnv(p, `{"name":"PHASE","valueFrom":{"fieldRef":{"fieldPath":"status.phase"}}}`)
		}), wantErr: `env PHASE: fieldRef "status.phase": not a field the kubelet resolves`},
		{name: "resourceFieldRef", edit: both(running, func(p map[string]any) {
			addEnv(p, `{"name":"CPUS","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu"}}}`)
		}), wantErr: "env CPUS: resourceFieldRef limits.cpu"},
		{name: "secretKeyRef with nothing to read it", edit: both(running, func(p map[string]any) {
			addEnv(p, `{"name":"T","valueFrom":{"secretKeyRef":{"name":"token","key":"TOKEN"}}}`)
		}), wantErr: "Secret token: no way to read it"},
		{name: "secretKeyRef, configMapKeyRef, envFrom", objects: fakeObjects, edit: both(running, func(p map[string]any) {
			addEnv(p, `{"name":"T","valueFrom":{"secretKeyRef":{"name":"token","key":"TOKEN"}}}`,
				`{"name":"SIZE","valueFrom":{"configMapKeyRef":{"name":"settings","key":"SIZE"}}}`,
				`{"name":"OPT","valueFrom":{"configMapKeyRef":{"name":"settings","key":"NONE","optional":true}}}`,
				`{"name":"OPT2","valueFrom":{"secretKeyRef":{"name":"nosuch","key":"K","optional":true}}}`,
				`{"name":"MODE","value":"override"}`)
			container0(p)["envFrom"] = []any{map[string]any{"prefix": "CM_", "configMapRef": map[string]any{"name": "settings"}},
				map[string]any{"secretRef": map[string]any{"name": "token"}},
				map[string]any{"configMapRef": map[string]any{"name": "gone", "optional": true}}}
		}), want: map[string]string{"T": "s3cret", "SIZE": "3", "CM_SIZE": "3", "CM_MODE": "mesh", "TOKEN": "s3cret", "MODE": "override"},
			absent: []string{"OPT", "OPT2"}},
		{name: "missing key", objects: fakeObjects, edit: both(running, func(p map[string]any) {
			addEnv(p, `{"name":"X","valueFrom":{"configMapKeyRef":{"name":"settings","key":"NONE"}}}`)
		}), wantErr: "no key NONE in ConfigMap kubetest/settings"},
		{name: "missing Secret", objects: fakeObjects, edit: both(running, func(p map[string]any) {
			container0(p)["envFrom"] = []any{map[string]any{"secretRef": map[string]any{"name": "gone"}}}
		}), wantErr: "Secret kubetest/gone not found"},
	}
}
