package kubetest

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// RefKind is the kind of object an env reference names.
type RefKind int

const (
	ConfigMapRef RefKind = iota + 1
	SecretRef
)

func (k RefKind) String() string {
	switch k {
	case ConfigMapRef:
		return "ConfigMap"
	case SecretRef:
		return "Secret"
	}
	return "RefKind(" + strconv.Itoa(int(k)) + ")"
}

// Objects reads a ConfigMap's or a Secret's data (a Secret's decoded),
// found false when there is no such object.
type Objects func(kind RefKind, namespace, name string) (data map[string]string, found bool, err error)

// refs resolves a container's references in the pod's namespace.
type refs struct {
	objects   Objects
	namespace string
}

func (r refs) data(kind RefKind, ref *keyRef) (map[string]string, bool, error) {
	if r.objects == nil {
		return nil, false, fmt.Errorf("%s %s: no way to read it given (Cluster.Objects reads it)", kind, ref.Name)
	}
	data, found, err := r.objects(kind, r.namespace, ref.Name)
	if err != nil {
		return nil, false, fmt.Errorf("%s %s/%s: %w", kind, r.namespace, ref.Name, err)
	}
	if !found && !ref.Optional {
		return nil, false, fmt.Errorf("%s %s/%s not found", kind, r.namespace, ref.Name)
	}
	return data, found, nil
}

// envFrom is an envFrom source's variables, prefixed.
func (r refs) envFrom(from envFrom) (map[string]string, error) {
	kind, ref := ConfigMapRef, from.ConfigMapRef
	if ref == nil {
		kind, ref = SecretRef, from.SecretRef
	}
	if ref == nil {
		return nil, errors.New("envFrom with neither configMapRef nor secretRef")
	}
	data, _, err := r.data(kind, ref)
	out := make(map[string]string, len(data))
	for k, v := range data {
		out[from.Prefix+k] = v
	}
	return out, err
}

// key is one key of a ConfigMap or Secret; ok false when an optional
// one is missing.
func (r refs) key(kind RefKind, ref *keyRef) (string, bool, error) {
	data, found, err := r.data(kind, ref)
	if err != nil || !found {
		return "", false, err
	}
	v, ok := data[ref.Key]
	if !ok && !ref.Optional {
		return "", false, fmt.Errorf("no key %s in %s %s/%s", ref.Key, kind, r.namespace, ref.Name)
	}
	return v, ok, nil
}

// value is one env entry's value given the variables before it; ok
// false when it is left out.
func (p *podObject) value(v envVar, env map[string]string, r refs) (string, bool, error) {
	from := v.ValueFrom
	switch {
	case v.Value != "" || from == nil:
		return expand(v.Value, env), true, nil
	case from.FieldRef != nil:
		s, err := p.field(from.FieldRef.FieldPath)
		return s, err == nil, err
	case from.ConfigMapKeyRef != nil:
		return r.key(ConfigMapRef, from.ConfigMapKeyRef)
	case from.SecretKeyRef != nil:
		return r.key(SecretRef, from.SecretKeyRef)
	case from.ResourceFieldRef != nil:
		return "", false, fmt.Errorf("resourceFieldRef %s: not resolved here", from.ResourceFieldRef.Resource)
	}
	return "", false, errors.New("valueFrom with no source this knows")
}

// field is a Downward API fieldPath's value.
func (p *podObject) field(path string) (string, error) {
	m := &p.Metadata
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return m.Annotations[key], nil
	}
	if key, ok := subscript(path, "metadata.labels"); ok {
		return m.Labels[key], nil
	}
	switch path {
	case "metadata.name":
		return m.Name, nil
	case "metadata.namespace":
		return m.Namespace, nil
	case "metadata.uid":
		return m.UID, nil
	case "metadata.labels":
		return formatMap(m.Labels), nil
	case "metadata.annotations":
		return formatMap(m.Annotations), nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "spec.nodeName":
		return nonEmpty(path, p.Spec.NodeName, "the pod is not bound to a node yet")
	case "status.podIP", "status.podIPs":
		return ips(path, p.Status.PodIP, p.Status.PodIPs)
	case "status.hostIP", "status.hostIPs":
		return ips(path, p.Status.HostIP, p.Status.HostIPs)
	}
	return "", fmt.Errorf("fieldRef %q: not a field the kubelet resolves", path)
}

// subscript is KEY from "PATH['KEY']".
func subscript(path, field string) (string, bool) {
	rest, ok := strings.CutPrefix(path, field+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

func nonEmpty(path, v, why string) (string, error) {
	if v == "" {
		return "", fmt.Errorf("fieldRef %s: %s", path, why)
	}
	return v, nil
}

// ips is status.podIP (hostIP), the first of the status's IPs, or
// status.podIPs (hostIPs), all of them comma-separated.
func ips(path, first string, all []podIP) (string, error) {
	var list []string
	for _, ip := range all {
		list = append(list, ip.IP)
	}
	if len(list) == 0 && first != "" {
		list = []string{first}
	}
	if len(list) == 0 {
		return "", fmt.Errorf("fieldRef %s: the pod has none (no kubelet ran it; MarkPodRunning posts them)", path)
	}
	if strings.HasSuffix(path, "s") {
		return strings.Join(list, ","), nil
	}
	return list[0], nil
}

// formatMap is a whole labels or annotations map as the Downward API
// writes it: key="quoted value" lines, sorted by key.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(m[k]))
	}
	return strings.TrimSuffix(b.String(), "\n")
}
