// Package exchange serves an agent's address record beside /metrics and
// fetches its peers', over HTTP, both ends proving the job token (--token-
// file) as the mesh's rendezvous does, without sending it: the request
// carries a fresh nonce, the time and their HMAC under the token; the
// reply carries the HMAC of the nonce and the record. So no one without
// the token reads an agent's address, and no one can answer for a peer
// and steer its probes elsewhere. A replayed request gets an answer bound
// to the old nonce, which only its first sender could use, and only within
// MaxSkew.
package exchange

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/rdmabench/rdmabench/agent/wire"
	"github.com/rdmabench/rdmabench/auth"
)

// The request's and reply's headers.
const (
	HeaderNonce = "Rdmabench-Nonce"
	HeaderTime  = "Rdmabench-Time"
	HeaderAuth  = "Rdmabench-Auth"
)

const (
	labelRequest = "rdmabench agent address request"
	labelReply   = "rdmabench agent address reply"
	nonceBytes   = 32
)

// MaxSkew is how far a request's time may be from the server's clock.
const MaxSkew = 5 * time.Minute

// ErrDenied is a request or reply that does not prove the token.
var ErrDenied = errors.New("does not prove the job token")

// Source gives the record to serve, or an error while there is none (the
// device is gone and being reopened): the request then gets 503.
type Source func() (wire.Address, error)

// Handler serves the record src gives at wire.AddressPath to requests that
// prove token.
func Handler(token []byte, src Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		nonce, err := hex.DecodeString(r.Header.Get(HeaderNonce))
		ts := r.Header.Get(HeaderTime)
		got, err2 := hex.DecodeString(r.Header.Get(HeaderAuth))
		sec, err3 := strconv.ParseInt(ts, 10, 64)
		if err != nil || err2 != nil || err3 != nil || len(nonce) != nonceBytes {
			http.Error(w, "an address request needs its nonce, time and token proof", http.StatusUnauthorized)
			return
		}
		if d := time.Since(time.Unix(sec, 0)); d > MaxSkew || d < -MaxSkew {
			http.Error(w, fmt.Sprintf("request time %d is %v from this agent's clock, more than %v", sec, d.Round(time.Second), MaxSkew), http.StatusUnauthorized)
			return
		}
		if !hmac.Equal(got, auth.Tag(token, labelRequest, nonce, []byte(ts))) {
			http.Error(w, "the request "+ErrDenied.Error(), http.StatusUnauthorized)
			return
		}
		a, err := src()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		body, err := a.MarshalJSON()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(HeaderAuth, hex.EncodeToString(auth.Tag(token, labelReply, nonce, body)))
		w.Write(body)
	})
}

// Fetch asks the agent at hostport for its record, within ctx.
func Fetch(ctx context.Context, c *http.Client, hostport string, token []byte) (wire.Address, error) {
	nonce := make([]byte, nonceBytes)
	if _, err := rand.Read(nonce); err != nil {
		return wire.Address{}, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostport+wire.AddressPath, nil)
	if err != nil {
		return wire.Address{}, err
	}
	req.Header.Set(HeaderNonce, hex.EncodeToString(nonce))
	req.Header.Set(HeaderTime, ts)
	req.Header.Set(HeaderAuth, hex.EncodeToString(auth.Tag(token, labelRequest, nonce, []byte(ts))))
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL: the caller names the peer
		}
		return wire.Address{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, wire.MaxAddressBytes+1))
	if err != nil {
		return wire.Address{}, fmt.Errorf("read the address record: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := bytes.TrimSpace(body)
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return wire.Address{}, fmt.Errorf("%s: %s", resp.Status, msg)
	}
	got, err := hex.DecodeString(resp.Header.Get(HeaderAuth))
	if err != nil || !hmac.Equal(got, auth.Tag(token, labelReply, nonce, body)) {
		return wire.Address{}, fmt.Errorf("the reply %w", ErrDenied)
	}
	a, err := wire.ReadAddress(bytes.NewReader(body))
	if err != nil {
		return wire.Address{}, err
	}
	return a, nil
}
