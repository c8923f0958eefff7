package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/health"
	"github.com/rdmabench/rdmabench/internal/durflag"
	"github.com/rdmabench/rdmabench/kube"
	"github.com/rdmabench/rdmabench/results"
)

// nodeFlags put health's verdict on the node's Kubernetes Node object.
type nodeFlags struct {
	condition, taint bool
	node, kubeconfig string
	every            time.Duration
}

func addNodeFlags(fs *pflag.FlagSet) *nodeFlags {
	nf := &nodeFlags{}
	fs.BoolVar(&nf.condition, "node-condition", false, "write the verdict as the condition "+string(kube.ConditionType)+" of this node's Kubernetes Node (True: unhealthy, reason the fault code; False: healthy; Unknown: cannot check), as the Node Problem Detector does")
	fs.BoolVar(&nf.taint, "taint", false, "with --node-condition: taint the node "+kube.TaintKey+"=CODE:NoSchedule while unhealthy, and take it off when healthy")
	fs.StringVar(&nf.node, "node-name", "", "the Node to write (default: $NODE_NAME, from the Downward API's spec.nodeName)")
	addKubeconfigFlag(fs, &nf.kubeconfig)
	durflag.VarP(fs, &nf.every, "every", "", 0, "check again every this long until SIGTERM (a DaemonSet's pod); 0: once")
	return nf
}

// client checks the flags and connects; nil without --node-condition.
func (nf *nodeFlags) client() (*kube.Client, error) {
	switch {
	case !nf.condition && nf.taint:
		return nil, errors.New("--taint goes with --node-condition")
	case !nf.condition && (nf.node != "" || nf.kubeconfig != ""):
		return nil, errors.New("--node-name and --kubeconfig go with --node-condition")
	case !nf.condition:
		return nil, nil
	}
	if nf.node == "" {
		nf.node = os.Getenv("NODE_NAME")
	}
	if nf.node == "" {
		return nil, errors.New("--node-condition: which node? give --node-name NAME or set $NODE_NAME (the Downward API's spec.nodeName)")
	}
	return kube.Connect(nf.kubeconfig)
}

// publish writes rep to the node: its condition, and the taint with
// --taint; one line on stderr says what changed.
func (nf *nodeFlags) publish(ctx context.Context, c *kube.Client, rep *health.Report, stderr io.Writer) error {
	v := kube.Verdict{Status: rep.Status(), Code: rep.FirstCode(), Message: rep.Reason()}
	cond, err := c.SetCondition(ctx, nf.node, v, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "rdmabench health: node %s: condition %s=%s reason %s\n", nf.node, cond.Type, cond.Status, cond.Reason)
	if !nf.taint {
		return nil
	}
	changed, err := c.SetTaint(ctx, nf.node, v)
	if err == nil && changed {
		what := "taken off"
		if v.Status == results.Unhealthy {
			what = "put on, value " + string(v.Code)
		}
		fmt.Fprintf(stderr, "rdmabench health: node %s: taint %s %s\n", nf.node, kube.TaintKey, what)
	}
	return err
}
