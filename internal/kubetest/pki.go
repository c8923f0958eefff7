package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certLife is how long every certificate of a test's plane is valid: far
// longer than any test, short enough that a stray file is useless.
const certLife = 24 * time.Hour

// keyPair is a certificate and its ECDSA key, both as PEM files on disk
// and in memory, for signing the next certificate.
type keyPair struct {
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	certFile string
	keyFile  string
	certPEM  []byte
}

// certSpec is what a certificate says: who it names and what it serves.
type certSpec struct {
	cn     string
	orgs   []string
	ips    []net.IP
	dns    []string
	server bool // a serving certificate, else a client's
}

// pki is every key a plane needs, written under dir.
type pki struct {
	ca, apiserver, admin, controllerManager, scheduler keyPair
	// saKey signs service account tokens (apiserver's TokenRequest, the
	// controller manager's legacy token secrets); saPub checks them.
	saKey, saPub string
}

// newPKI makes a CA and the certificates the apiserver and its clients
// present. The controller manager runs with
// --use-service-account-credentials=false, so all its controllers act as
// its own user: that user is in system:masters, since the
// system:kube-controller-manager role alone cannot create a Job's pods.
func newPKI(dir string, serviceIP net.IP) (*pki, error) {
	var p pki
	var err error
	if p.ca, err = newCA(dir); err != nil {
		return nil, err
	}
	specs := []struct {
		name string
		out  *keyPair
		spec certSpec
	}{
		{"apiserver", &p.apiserver, certSpec{cn: "kube-apiserver", server: true,
			ips: []net.IP{net.IPv4(127, 0, 0, 1), serviceIP},
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}}},
		{"admin", &p.admin, certSpec{cn: "admin", orgs: []string{"system:masters"}}},
		{"controller-manager", &p.controllerManager, certSpec{cn: "system:kube-controller-manager",
			orgs: []string{"system:masters"}}},
		{"scheduler", &p.scheduler, certSpec{cn: "system:kube-scheduler"}},
	}
	for _, s := range specs {
		if *s.out, err = p.ca.sign(dir, s.name, s.spec); err != nil {
			return nil, err
		}
	}
	p.saKey, p.saPub, err = newSAKeys(dir)
	return &p, err
}

func newCA(dir string) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	tmpl := template(pkix.Name{CommonName: "rdmabench-kubetest-ca"})
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign
	return writePair(dir, "ca", tmpl, tmpl, key, key)
}

// sign issues a certificate for spec under the CA.
func (ca keyPair) sign(dir, name string, spec certSpec) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	tmpl := template(pkix.Name{CommonName: spec.cn, Organization: spec.orgs})
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if spec.server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	tmpl.IPAddresses, tmpl.DNSNames = spec.ips, spec.dns
	return writePair(dir, name, tmpl, ca.cert, key, ca.key)
}

func template(name pkix.Name) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      name,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(certLife),
	}
}

// writePair signs tmpl with the parent's key and writes NAME.crt, NAME.key.
func writePair(dir, name string, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) (keyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("certificate %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, err
	}
	kp := keyPair{cert: cert, key: key,
		certFile: filepath.Join(dir, name+".crt"), keyFile: filepath.Join(dir, name+".key"),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	if err := os.WriteFile(kp.certFile, kp.certPEM, 0o644); err != nil {
		return keyPair{}, err
	}
	return kp, writeKey(kp.keyFile, key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// newSAKeys writes the service account signing key and its public half.
func newSAKeys(dir string) (priv, pub string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	priv, pub = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := writeKey(priv, key); err != nil {
		return "", "", err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	return priv, pub, os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
}
