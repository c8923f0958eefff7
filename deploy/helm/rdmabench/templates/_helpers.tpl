{{/* The release's prefix for every object's name, at most 63 characters less room for a suffix. */}}
{{- define "rdmabench.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries; pass (dict "root" $ "component" "agent"). */}}
{{- define "rdmabench.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{ include "rdmabench.selectorLabels" . }}
{{- end -}}

{{/* What a workload's selector matches: fixed for the life of a release. */}}
{{- define "rdmabench.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "rdmabench.image" -}}
{{ printf "%s:%s" .Values.image.repository (toString .Values.image.tag) | quote }}
{{- end -}}

{{- define "rdmabench.tokenSecret" -}}
{{- .Values.token.existingSecret | default (printf "%s-token" (include "rdmabench.fullname" .)) -}}
{{- end -}}

{{/* The RDMA devices: the device plugin's resource as request and limit (an extended resource must be both). */}}
{{- define "rdmabench.resources" -}}
{{- $r := deepCopy (.section.resources | default dict) -}}
{{- with .root.Values.rdma.resourceName -}}
{{- $n := toString $.root.Values.rdma.resourceCount -}}
{{- $_ := set $r "requests" (merge (dict . $n) ($r.requests | default dict)) -}}
{{- $_ := set $r "limits" (merge (dict . $n) ($r.limits | default dict)) -}}
{{- end -}}
{{- if $r }}
resources:
  {{- toYaml $r | nindent 2 }}
{{- end -}}
{{- end -}}

{{- define "rdmabench.securityContext" -}}
securityContext:
{{- if .Values.rdma.privileged }}
  privileged: true
{{- else }}
  capabilities:
    add: {{ toJson .Values.rdma.capabilities }}
{{- end }}
{{- end -}}

{{/* Every rdmabench pod shares the node's network: the RNICs' GIDs and netdevs are the host's. */}}
{{- define "rdmabench.podNetwork" -}}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* nodeSelector, affinity and tolerations of a section; pass (dict "section" .Values.agent "taint" true). */}}
{{- define "rdmabench.placement" -}}
{{- with .section.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .section.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if or .section.tolerations .taint }}
tolerations:
{{- if .taint }}
  # health's own taint: the pod that clears it must still be scheduled
  # on the node it tainted.
  - key: rdmabench.io/rdma-unhealthy
    operator: Exists
    effect: NoSchedule
{{- end }}
{{- with .section.tolerations }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The mesh's name: the Job's, the JobSet's and the Indexed Job's subdomain. */}}
{{- define "rdmabench.meshName" -}}
{{- printf "%s-mesh" (include "rdmabench.fullname" .) -}}
{{- end -}}

{{/* One rank's pod spec, the Job's and the JobSet's; pass (dict "root" $ "env" LIST). */}}
{{- define "rdmabench.meshPod" -}}
{{- $v := .root.Values -}}
restartPolicy: Never
# The mesh never calls the API.
automountServiceAccountToken: false
{{ include "rdmabench.podNetwork" .root }}
{{- include "rdmabench.placement" (dict "section" $v.mesh "taint" false) }}
{{- if and $v.mesh.onePerNode (not $v.mesh.affinity) }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "rdmabench.selectorLabels" (dict "root" .root "component" "mesh") | nindent 12 }}
{{- end }}
containers:
  - name: mesh
    image: {{ include "rdmabench.image" .root }}
    imagePullPolicy: {{ $v.image.pullPolicy }}
    args:
      - mesh
      {{- range $v.mesh.extraArgs }}
      - {{ . | quote }}
      {{- end }}
    env:
      {{- toYaml .env | nindent 6 }}
      - name: RDMABENCH_WORLD_SIZE
        value: {{ $v.mesh.size | quote }}
      - name: RDMABENCH_TOKEN
        valueFrom:
          secretKeyRef:
            name: {{ include "rdmabench.tokenSecret" .root }}
            key: {{ $v.token.key }}
    {{- include "rdmabench.securityContext" .root | nindent 4 }}
    {{- include "rdmabench.resources" (dict "root" .root "section" $v.mesh) | trim | nindent 4 }}
{{- end -}}
