package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/kube"
)

// agentKubeFlags are the agent's peers from a Service's EndpointSlices.
type agentKubeFlags struct {
	service, namespace, portName, kubeconfig string
}

func addAgentKubeFlags(fs *pflag.FlagSet) *agentKubeFlags {
	k := &agentKubeFlags{}
	fs.StringVar(&k.service, "kube-service", "", "take the peers from this Kubernetes Service's EndpointSlices (the agents' DaemonSet), watched for nodes that join or leave, instead of --peers")
	fs.StringVar(&k.namespace, "kube-namespace", "", "the Service's namespace (default: $POD_NAMESPACE, else the pod's or the kubeconfig's)")
	fs.StringVar(&k.portName, "kube-port-name", "metrics", "the Service port whose number is each agent's --listen port (\"\": its only port)")
	addKubeconfigFlag(fs, &k.kubeconfig)
	return k
}

func addKubeconfigFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "kubeconfig", "", "kubeconfig of the Kubernetes API server (default: the pod's service account in a cluster, else $KUBECONFIG or ~/.kube/config)")
}

// source is the peer source --kube-service names, nil without it.
func (k *agentKubeFlags) source(log io.Writer) (*kube.PeerSource, error) {
	if k.service == "" {
		return nil, nil
	}
	c, err := kube.Connect(k.kubeconfig)
	if err != nil {
		return nil, err
	}
	ns := k.namespace
	if ns == "" {
		ns = os.Getenv("POD_NAMESPACE")
	}
	if ns == "" {
		ns = c.Namespace
	}
	logf := func(format string, a ...any) { fmt.Fprintf(log, "rdmabench agent: "+format+"\n", a...) }
	return &kube.PeerSource{C: c, S: kube.Service{Namespace: ns, Name: k.service, PortName: k.portName}, Logf: logf}, nil
}
