package kubetest

import (
	"encoding/json"
	"os"
)

// kubeconfig is the part of a kubeconfig file (clientcmd's v1 Config)
// that the plane's clients need: one cluster, one user, one context.
// JSON is YAML, so kubectl, helm and client-go read it as written.
type kubeconfig struct {
	APIVersion     string         `json:"apiVersion"`
	Kind           string         `json:"kind"`
	Clusters       []namedCluster `json:"clusters"`
	Users          []namedUser    `json:"users"`
	Contexts       []namedContext `json:"contexts"`
	CurrentContext string         `json:"current-context"`
}

type namedCluster struct {
	Name    string      `json:"name"`
	Cluster clusterInfo `json:"cluster"`
}

type clusterInfo struct {
	Server string `json:"server"`
	CAData []byte `json:"certificate-authority-data"`
}

type namedUser struct {
	Name string   `json:"name"`
	User userInfo `json:"user"`
}

// userInfo is a client certificate or a bearer token; []byte fields
// marshal as base64, as kubeconfig's *-data fields are.
type userInfo struct {
	CertData []byte `json:"client-certificate-data,omitempty"`
	KeyData  []byte `json:"client-key-data,omitempty"`
	Token    string `json:"token,omitempty"`
}

type namedContext struct {
	Name    string      `json:"name"`
	Context contextInfo `json:"context"`
}

type contextInfo struct {
	Cluster   string `json:"cluster"`
	User      string `json:"user"`
	Namespace string `json:"namespace,omitempty"`
}

// writeKubeconfig writes a kubeconfig for server, trusting caPEM, as
// user (named name), with namespace as its context's default if set.
func writeKubeconfig(path, server string, caPEM []byte, name string, user userInfo, namespace string) error {
	cfg := kubeconfig{
		APIVersion:     "v1",
		Kind:           "Config",
		Clusters:       []namedCluster{{Name: "kubetest", Cluster: clusterInfo{Server: server, CAData: caPEM}}},
		Users:          []namedUser{{Name: name, User: user}},
		Contexts:       []namedContext{{Name: name, Context: contextInfo{Cluster: "kubetest", User: name, Namespace: namespace}}},
		CurrentContext: name,
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

// certUser is the kubeconfig user that presents kp.
func certUser(kp keyPair) (userInfo, error) {
	key, err := os.ReadFile(kp.keyFile)
	if err != nil {
		return userInfo{}, err
	}
	return userInfo{CertData: kp.certPEM, KeyData: key}, nil
}
