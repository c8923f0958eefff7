package kubetest

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
)

// The part of a Pod, as the API returns it, that a container's
// environment is made from.
type podObject struct {
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		UID         string            `json:"uid"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		NodeName           string      `json:"nodeName"`
		ServiceAccountName string      `json:"serviceAccountName"`
		Hostname           string      `json:"hostname"`
		HostNetwork        bool        `json:"hostNetwork"`
		Containers         []container `json:"containers"`
	} `json:"spec"`
	Status struct {
		PodIP   string  `json:"podIP"`
		PodIPs  []podIP `json:"podIPs"`
		HostIP  string  `json:"hostIP"`
		HostIPs []podIP `json:"hostIPs"`
	} `json:"status"`
}

type podIP struct {
	IP string `json:"ip"`
}

type container struct {
	Name    string    `json:"name"`
	Command []string  `json:"command"`
	Args    []string  `json:"args"`
	Env     []envVar  `json:"env"`
	EnvFrom []envFrom `json:"envFrom"`
}

type envVar struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `json:"fieldPath"`
		} `json:"fieldRef"`
		ResourceFieldRef *struct {
			Resource string `json:"resource"`
		} `json:"resourceFieldRef"`
		ConfigMapKeyRef *keyRef `json:"configMapKeyRef"`
		SecretKeyRef    *keyRef `json:"secretKeyRef"`
	} `json:"valueFrom"`
}

type keyRef struct {
	Name     string `json:"name"`
	Key      string `json:"key"`
	Optional bool   `json:"optional"`
}

type envFrom struct {
	Prefix       string  `json:"prefix"`
	ConfigMapRef *keyRef `json:"configMapRef"`
	SecretRef    *keyRef `json:"secretRef"`
}

// PodEnv is the environment the kubelet and the container runtime give
// the pod's first container, from the Pod as the API returns it: see
// ContainerEnv. ConfigMap and Secret references are errors here; the
// Cluster's Objects resolves them.
func PodEnv(pod []byte) (map[string]string, error) {
	return ContainerEnv(pod, "", nil)
}

// ContainerEnv is the environment of the container named container (the
// first when ""), made as the kubelet makes it (kubelet_pods.go,
// makeEnvironmentVariables, v1.37.2): envFrom first, then env in order,
// a literal value with its $(VAR) references to the variables before it
// expanded, a fieldRef read from the Pod, a configMapKeyRef or
// secretKeyRef through objects (an optional one that is missing leaves
// the variable out). HOSTNAME is added as containerd adds it, unless the
// pod sets its own; $(HOSTNAME) in a value is not expanded from it.
//
// Where the kubelet reads its own state this reads the Pod's status: a
// status.podIP or status.hostIP the Pod has not got yet (no kubelet ran
// it; MarkPodRunning posts one) is an error rather than "", as are a
// spec.nodeName before the pod is bound, a resourceFieldRef and a
// fieldPath the kubelet does not know. Service links
// (KUBERNETES_SERVICE_HOST and the like) and the image's ENV are not
// added.
func ContainerEnv(pod []byte, container string, objects Objects) (map[string]string, error) {
	p, _, env, err := kubeletEnv(pod, container, objects)
	if err != nil {
		return nil, err
	}
	// The runtime adds HOSTNAME after the kubelet has expanded $(VAR)s,
	// and the pod's own replaces it.
	if _, ok := env["HOSTNAME"]; !ok {
		env["HOSTNAME"] = p.hostname()
	}
	return env, nil
}

// PodCommand is the container's command and arguments with their $(VAR)
// references expanded from its environment (less the runtime's
// HOSTNAME), as the kubelet expands them before it starts the container;
// it is empty when the image's entrypoint would run.
func PodCommand(pod []byte, container string, objects Objects) ([]string, error) {
	_, c, env, err := kubeletEnv(pod, container, objects)
	if err != nil {
		return nil, err
	}
	var argv []string
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		argv = append(argv, expand(a, env))
	}
	return argv, nil
}

// kubeletEnv parses the pod and makes the variables the kubelet gives
// the named container.
func kubeletEnv(pod []byte, name string, objects Objects) (*podObject, *container, map[string]string, error) {
	var p podObject
	if err := json.Unmarshal(pod, &p); err != nil {
		return nil, nil, nil, fmt.Errorf("pod: %w", err)
	}
	c, err := p.container(name)
	if err != nil {
		return nil, nil, nil, err
	}
	env, err := p.env(c, objects)
	return &p, c, env, err
}

func (p *podObject) env(c *container, objects Objects) (map[string]string, error) {
	env := map[string]string{}
	r := refs{objects: objects, namespace: p.Metadata.Namespace}
	for _, from := range c.EnvFrom {
		data, err := r.envFrom(from)
		if err != nil {
			return nil, fmt.Errorf("pod %s container %s: %w", p.Metadata.Name, c.Name, err)
		}
		maps.Copy(env, data)
	}
	for _, v := range c.Env {
		val, ok, err := p.value(v, env, r)
		if err != nil {
			return nil, fmt.Errorf("pod %s container %s: env %s: %w", p.Metadata.Name, c.Name, v.Name, err)
		}
		if ok {
			env[v.Name] = val
		}
	}
	return env, nil
}

func (p *podObject) container(name string) (*container, error) {
	for i, c := range p.Spec.Containers {
		if name == "" || c.Name == name {
			return &p.Spec.Containers[i], nil
		}
	}
	if name == "" {
		return nil, fmt.Errorf("pod %s has no containers", p.Metadata.Name)
	}
	return nil, fmt.Errorf("pod %s has no container %q", p.Metadata.Name, name)
}

// hostname is the UTS hostname the pod's containers see: spec.hostname
// or the pod's name (at most 63 characters), or with hostNetwork the
// node's own hostname, for which a kubelet registers its Node by default.
func (p *podObject) hostname() string {
	switch {
	case p.Spec.HostNetwork:
		return p.Spec.NodeName
	case p.Spec.Hostname != "":
		return p.Spec.Hostname
	}
	name := p.Metadata.Name
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-.")
	}
	return name
}
