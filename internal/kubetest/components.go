package kubetest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testport"
)

// startEtcd starts a one-member etcd on two free loopback ports and
// returns its client URL once it answers /health.
func (c *Cluster) startEtcd(t testing.TB, bin string) string {
	t.Helper()
	client := "http://" + testport.Addr(t)
	peer := "http://" + testport.Addr(t)
	p := c.start(t, "etcd", bin,
		"--name=kubetest",
		"--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=kubetest="+peer,
		// The apiserver's watch cache serves consistent lists only once
		// etcd reports progress; 3.4's default is every 10 minutes.
		"--experimental-watch-progress-notify-interval=5s",
		"--log-level=warn", "--logger=zap")
	c.waitHTTP(t, p, http.DefaultClient, client+"/health", 30*time.Second)
	return client
}

// startAPIServer starts kube-apiserver on a free loopback port and waits
// for /readyz.
func (c *Cluster) startAPIServer(t testing.TB, etcd string) {
	t.Helper()
	port := testport.Free(t)
	c.Server = "https://127.0.0.1:" + port
	k := c.pki
	start := time.Now()
	p := c.start(t, "kube-apiserver", filepath.Join(c.Tools, "kube-apiserver"),
		"--etcd-servers="+etcd,
		"--bind-address=127.0.0.1", "--secure-port="+port,
		// The endpoint reconciler refuses a loopback address for the
		// kubernetes Service's endpoints ("cannot use public IP 127.0.0.1
		// with endpoint reconciler"); no pod dials that Service here.
		"--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--service-cluster-ip-range="+ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true", // the chart's privileged option
		"--client-ca-file="+k.ca.certFile,
		"--tls-cert-file="+k.apiserver.certFile, "--tls-private-key-file="+k.apiserver.keyFile,
		"--service-account-key-file="+k.saPub,
		"--service-account-signing-key-file="+k.saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--cert-dir="+filepath.Join(c.dir, "apiserver-certs"),
		// A kubelet (StartKubelet) serves on 127.0.0.1 only and refuses a
		// loopback node IP: its Hostname address is the one to dial. It
		// takes the admin's certificate as the API server's.
		"--kubelet-preferred-address-types=Hostname,InternalIP,ExternalIP",
		"--kubelet-client-certificate="+k.admin.certFile, "--kubelet-client-key="+k.admin.keyFile)
	admin, err := certUser(k.admin)
	if err == nil {
		c.Kubeconfig = filepath.Join(c.dir, "admin.kubeconfig")
		err = writeKubeconfig(c.Kubeconfig, c.Server, k.ca.certPEM, "admin", admin, "")
	}
	if err != nil {
		t.Fatalf("kubetest: admin kubeconfig: %v", err)
	}
	c.waitHTTP(t, p, c.adminHTTP(t), c.Server+"/readyz", readyWithin)
	c.ReadyAfter = time.Since(start)
	t.Logf("kubetest: kube-apiserver %s ready after %v", c.Server, c.ReadyAfter.Round(time.Millisecond))
}

// startControllers starts the controller manager and the scheduler, each
// with a kubeconfig of its own user.
func (c *Cluster) startControllers(t testing.TB) {
	t.Helper()
	cm := c.componentKubeconfig(t, "controller-manager", c.pki.controllerManager)
	c.start(t, "kube-controller-manager", filepath.Join(c.Tools, "kube-controller-manager"),
		"--kubeconfig="+cm,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--root-ca-file="+c.pki.ca.certFile,
		"--service-account-private-key-file="+c.pki.saKey,
		"--bind-address=127.0.0.1", "--secure-port=0")
	sched := c.componentKubeconfig(t, "scheduler", c.pki.scheduler)
	c.start(t, "kube-scheduler", filepath.Join(c.Tools, "kube-scheduler"),
		"--kubeconfig="+sched,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=0")
}

// controllers are the controller manager's loops the tests need: Jobs'
// indexed pods, DaemonSets' pods, Services' EndpointSlices, service
// accounts and their tokens, owner references' cascades, namespaces'
// deletion, and each namespace's kube-root-ca.crt. The node lifecycle
// controller is left out on purpose: with no kubelet to post heartbeats
// it would mark every Node unreachable and taint it.
var controllers = []string{
	"job-controller", "daemonset-controller", "replicaset-controller",
	"deployment-controller", "endpointslice-controller",
	"serviceaccount-controller", "serviceaccount-token-controller",
	"garbage-collector-controller", "namespace-controller",
	"root-ca-certificate-publisher-controller", "clusterrole-aggregation-controller",
}

func (c *Cluster) componentKubeconfig(t testing.TB, name string, kp keyPair) string {
	t.Helper()
	path := filepath.Join(c.dir, name+".kubeconfig")
	u, err := certUser(kp)
	if err == nil {
		err = writeKubeconfig(path, c.Server, c.pki.ca.certPEM, name, u, "")
	}
	if err != nil {
		t.Fatalf("kubetest: %s kubeconfig: %v", name, err)
	}
	return path
}

// adminHTTP is an HTTP client that trusts the plane's CA and presents
// the admin's certificate.
func (c *Cluster) adminHTTP(t testing.TB) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(c.pki.ca.cert)
	cert, err := tls.LoadX509KeyPair(c.pki.admin.certFile, c.pki.admin.keyFile)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// waitHTTP polls url until it answers 200, failing t with p's log tail
// when p ends first or the deadline passes.
func (c *Cluster) waitHTTP(t testing.TB, p *proc, client *http.Client, url string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		if ended, err := p.exited(); ended {
			t.Fatalf("kubetest: %s ended before %s answered (%v); its log's tail follows", p.name, url, err)
		}
		last = get(client, url)
		if last == "" {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("kubetest: %s not ready after %v (last: %s); %s's log's tail follows", url, within, last, p.name)
}

// get is "" when url answers 200, else what went wrong.
func get(client *http.Client, url string) string {
	resp, err := client.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
	if resp.StatusCode == http.StatusOK {
		return ""
	}
	return fmt.Sprintf("%s: %s", resp.Status, body)
}
