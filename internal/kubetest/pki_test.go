package kubetest

import (
	"crypto/x509"
	"net"
	"slices"
	"testing"
)

// The apiserver's certificate verifies for every name a client uses, and
// the client certificates carry the users and groups RBAC reads.
func TestPKI(t *testing.T) {
	p, err := newPKI(t.TempDir(), net.ParseIP("198.19.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.cert)
	for _, name := range []string{"127.0.0.1", "198.19.0.1", "localhost", "kubernetes.default.svc"} {
		_, err := p.apiserver.cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots})
		if err != nil {
			t.Errorf("apiserver certificate for %s: %v", name, err)
		}
	}
	if _, err := p.apiserver.cert.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots}); err == nil {
		t.Error("apiserver certificate verifies for example.com")
	}
	for _, tc := range []struct {
		kp       keyPair
		cn, orgs string
	}{
		{p.admin, "admin", "system:masters"},
		{p.controllerManager, "system:kube-controller-manager", "system:masters"},
		{p.scheduler, "system:kube-scheduler", ""},
	} {
		c := tc.kp.cert
		if c.Subject.CommonName != tc.cn || (tc.orgs != "") != slices.Contains(c.Subject.Organization, tc.orgs) {
			t.Errorf("subject %v, want CN %s O %q", c.Subject, tc.cn, tc.orgs)
		}
		opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if _, err := c.Verify(opts); err != nil {
			t.Errorf("%s as a client: %v", tc.cn, err)
		}
	}
}
