package auth

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func exchange(t *testing.T, serverToken, clientToken string) (serverErr, clientErr error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	deadline := time.Now().Add(2 * time.Second)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	done := make(chan error, 1)
	go func() {
		err := Challenge(a, []byte(serverToken))
		if err != nil {
			a.Close() // as a server does: drop the connection
		}
		done <- err
	}()
	clientErr = Respond(b, []byte(clientToken))
	if clientErr != nil {
		b.Close()
	}
	return <-done, clientErr
}

func TestChallengeResponse(t *testing.T) {
	if s, c := exchange(t, "job-42", "job-42"); s != nil || c != nil {
		t.Fatalf("same token: server %v, client %v", s, c)
	}
	s, c := exchange(t, "job-42", "job-41")
	if !errors.Is(s, ErrDenied) || c == nil {
		t.Errorf("wrong token: server %v, client %v", s, c)
	}
	if _, c := exchange(t, "", "x"); c == nil {
		t.Error("empty server token accepted")
	}
}

// A server that does not hold the token cannot pass as one: the client
// checks the server's proof too.
func TestImpostorServer(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		buf := make([]byte, nonceLen+32)
		a.Write(make([]byte, nonceLen))
		a.Read(buf)
		a.Write(make([]byte, 32)) // a made-up proof
	}()
	b.SetDeadline(time.Now().Add(2 * time.Second))
	if err := Respond(b, []byte("secret")); !errors.Is(err, ErrDenied) {
		t.Errorf("impostor accepted: %v", err)
	}
}

// A silent peer costs the challenger its deadline, no more.
func TestSilentPeer(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { buf := make([]byte, nonceLen); b.Read(buf) }()
	a.SetDeadline(time.Now().Add(200 * time.Millisecond))
	start := time.Now()
	if err := Challenge(a, []byte("t")); err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("silent peer: %v after %v", err, time.Since(start))
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "tok")
	os.WriteFile(f, []byte("  abc\n"), 0o600)
	if tok, err := Load(f, "env"); err != nil || string(tok) != "abc" {
		t.Errorf("file: %q %v", tok, err)
	}
	if tok, err := Load("", " xyz "); err != nil || string(tok) != "xyz" {
		t.Errorf("env: %q %v", tok, err)
	}
	if tok, err := Load("", ""); err != nil || tok != nil {
		t.Errorf("none: %q %v", tok, err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	big := filepath.Join(dir, "big")
	os.WriteFile(big, []byte(strings.Repeat("x", MaxTokenBytes+1)), 0o600)
	for _, p := range []string{empty, big, filepath.Join(dir, "missing")} {
		if _, err := Load(p, ""); err == nil {
			t.Errorf("%s accepted", p)
		}
	}
}
