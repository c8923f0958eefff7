// Package kube is rdmabench's client of the Kubernetes API: health's verdict
// as a node condition (and taint), and the agent's peers from a Service's
// EndpointSlices. Everything else (the rendezvous of an Indexed Job's
// ranks) needs no client: launch/kube.go reads the pod's variables.
package kube

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RequestTimeout bounds each call to the API server (a watch excepted):
// a health check or an agent must not hang on an API server that does not
// answer. It is a context's deadline, not the client's, which would cut
// every watch short.
const RequestTimeout = 10 * time.Second

// namespaceFile is where a pod's service account names its namespace.
const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Client is a connection to one cluster's API server.
type Client struct {
	Set kubernetes.Interface
	// Namespace is the pod's own (in a cluster) or the kubeconfig
	// context's: the default for namespaced objects.
	Namespace string
	// From says where the credentials came from, for the one line a
	// failure prints.
	From string
}

// Connect makes a client: from kubeconfig when given, else in the cluster
// (the pod's service account), else $KUBECONFIG or ~/.kube/config.
func Connect(kubeconfig string) (*Client, error) {
	if kubeconfig == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
		ns := "default"
		if b, err := os.ReadFile(namespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
			ns = strings.TrimSpace(string(b))
		}
		return newClient(cfg, ns, "the pod's service account")
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	from := "$KUBECONFIG or ~/.kube/config"
	if kubeconfig != "" {
		rules.ExplicitPath, from = kubeconfig, kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("no Kubernetes API server: not in a pod, and no --kubeconfig, $KUBECONFIG or ~/.kube/config")
		}
		return nil, fmt.Errorf("kubeconfig %s: %w", from, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", from, err)
	}
	return newClient(cfg, ns, from)
}

func newClient(cfg *rest.Config, ns, from string) (*Client, error) {
	cfg.UserAgent = "rdmabench"
	set, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", from, err)
	}
	return &Client{Set: set, Namespace: ns, From: from}, nil
}
