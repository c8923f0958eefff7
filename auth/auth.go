// Package auth proves, over a fresh connection, that both ends hold the same
// job token without sending it: an HMAC-SHA256 challenge-response over a
// nonce from each side. A stale process of an earlier job, or anything else
// that connects, cannot claim a place or read what the job shares.
//
// The side that accepted the connection calls Challenge, the side that
// dialled calls Respond. Both read fixed-size messages only, so a peer
// cannot make them allocate; the caller bounds the exchange with the
// connection's deadline.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

const nonceLen = 32

// ErrDenied is the error when the other end does not prove the token.
var ErrDenied = errors.New("the peer does not hold the job token")

// MaxTokenBytes bounds a token file.
const MaxTokenBytes = 4096

func mac(token []byte, label string, a, b []byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte(label))
	m.Write(a)
	m.Write(b)
	return m.Sum(nil)
}

// Challenge runs the accepting side: it sends a nonce, checks the peer's
// answer, then proves the token in turn. It returns ErrDenied (wrapped)
// when the peer's answer is wrong.
func Challenge(rw io.ReadWriter, token []byte) error {
	if len(token) == 0 {
		return errors.New("auth: empty token")
	}
	ns := make([]byte, nonceLen)
	if _, err := rand.Read(ns); err != nil {
		return fmt.Errorf("auth: nonce: %w", err)
	}
	if _, err := rw.Write(ns); err != nil {
		return fmt.Errorf("auth: send challenge: %w", err)
	}
	in := make([]byte, nonceLen+sha256.Size)
	if _, err := io.ReadFull(rw, in); err != nil {
		return fmt.Errorf("auth: read response: %w", err)
	}
	nc, got := in[:nonceLen], in[nonceLen:]
	if !hmac.Equal(got, mac(token, "rdmabench auth client", ns, nc)) {
		return fmt.Errorf("auth: %w", ErrDenied)
	}
	if _, err := rw.Write(mac(token, "rdmabench auth server", nc, ns)); err != nil {
		return fmt.Errorf("auth: send proof: %w", err)
	}
	return nil
}

// Respond runs the dialling side: it answers the challenge with a nonce of
// its own and checks that the accepting side holds the token too.
func Respond(rw io.ReadWriter, token []byte) error {
	if len(token) == 0 {
		return errors.New("auth: empty token")
	}
	ns := make([]byte, nonceLen)
	if _, err := io.ReadFull(rw, ns); err != nil {
		return fmt.Errorf("auth: read challenge: %w", err)
	}
	nc := make([]byte, nonceLen)
	if _, err := rand.Read(nc); err != nil {
		return fmt.Errorf("auth: nonce: %w", err)
	}
	if _, err := rw.Write(append(nc, mac(token, "rdmabench auth client", ns, nc)...)); err != nil {
		return fmt.Errorf("auth: send response: %w", err)
	}
	proof := make([]byte, sha256.Size)
	if _, err := io.ReadFull(rw, proof); err != nil {
		// The challenger closes the connection on a wrong answer.
		return fmt.Errorf("auth: read proof (wrong token?): %w", err)
	}
	if !hmac.Equal(proof, mac(token, "rdmabench auth server", nc, ns)) {
		return fmt.Errorf("auth: %w", ErrDenied)
	}
	return nil
}

// Load returns the job token from file (when not "") or else from the
// environment variable's value env; nil when neither is set. Surrounding
// white space is not part of the token.
func Load(file, env string) ([]byte, error) {
	var raw string
	switch {
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, MaxTokenBytes+1))
		if err != nil {
			return nil, fmt.Errorf("token file %s: %w", file, err)
		}
		if len(b) > MaxTokenBytes {
			return nil, fmt.Errorf("token file %s: longer than %d bytes", file, MaxTokenBytes)
		}
		raw = string(b)
		if strings.TrimSpace(raw) == "" {
			return nil, fmt.Errorf("token file %s is empty", file)
		}
	case env != "":
		raw = env
	default:
		return nil, nil
	}
	return []byte(strings.TrimSpace(raw)), nil
}

// Tag is the HMAC-SHA256 under token of label and parts, for a protocol
// that proves the token in a message rather than over a connection (the
// agent's address requests over HTTP). Compare tags with hmac.Equal.
func Tag(token []byte, label string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte(label))
	for _, p := range parts {
		// Each part's length first, so that parts cannot be moved across
		// their boundary to forge another message with the same tag.
		var n [8]byte
		for i := range n {
			n[i] = byte(uint64(len(p)) >> (8 * i))
		}
		m.Write(n[:])
		m.Write(p)
	}
	return m.Sum(nil)
}
