package exchange

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/agent/wire"
)

func record() wire.Address {
	return wire.Address{Version: wire.AddressVersion, Host: "node2", GID: net.ParseIP("::ffff:198.18.0.2"),
		QPN: 0x11, QKey: 0x11111111, Clock: wire.ClockCPU}
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func fetch(addr string, token string) (wire.Address, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return Fetch(ctx, http.DefaultClient, addr, []byte(token))
}

func TestFetch(t *testing.T) {
	good := serve(t, Handler([]byte("secret"), func() (wire.Address, error) { return record(), nil }))
	a, err := fetch(good, "secret")
	if err != nil || a.QPN != 0x11 || a.Host != "node2" {
		t.Fatalf("with the token: %+v, %v", a, err)
	}
	if _, err := fetch(good, "other"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("with another token: %v, want 401", err)
	}
	// An impostor without the token answers for the peer: its reply
	// cannot carry the right proof.
	impostor := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := record().MarshalJSON()
		w.Header().Set(HeaderAuth, strings.Repeat("00", 32))
		w.Write(body)
	}))
	if _, err := fetch(impostor, "secret"); !errors.Is(err, ErrDenied) {
		t.Errorf("an impostor's reply: %v, want ErrDenied", err)
	}
	// A proxy that changes the record on its way (another QPN) breaks
	// the proof too.
	target, _ := http.NewRequest(http.MethodGet, "http://"+good, nil)
	tamper := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := r.Clone(context.Background())
		req.URL.Scheme, req.URL.Host, req.RequestURI = "http", target.URL.Host, ""
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer resp.Body.Close()
		w.Header().Set(HeaderAuth, resp.Header.Get(HeaderAuth))
		a := record()
		a.QPN = 0x12
		body, _ := a.MarshalJSON()
		w.Write(body)
	}))
	if _, err := fetch(tamper, "secret"); !errors.Is(err, ErrDenied) {
		t.Errorf("a tampered record: %v, want ErrDenied", err)
	}
	down := serve(t, Handler([]byte("secret"), func() (wire.Address, error) { return wire.Address{}, errors.New("rxe0 is gone") }))
	if _, err := fetch(down, "secret"); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "rxe0 is gone") {
		t.Errorf("with the device gone: %v, want 503 and why", err)
	}
	huge := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat(" ", 10*wire.MaxAddressBytes)))
	}))
	if _, err := fetch(huge, "secret"); err == nil {
		t.Error("a record of 20 KiB was taken")
	}
}

func TestHandlerRefuses(t *testing.T) {
	h := Handler([]byte("secret"), func() (wire.Address, error) { return record(), nil })
	for _, c := range []struct {
		name   string
		header map[string]string
	}{
		{"no headers", nil},
		{"short nonce", map[string]string{HeaderNonce: "00", HeaderTime: "1", HeaderAuth: "00"}},
		{"stale", map[string]string{HeaderNonce: strings.Repeat("ab", 32), HeaderTime: "1000", HeaderAuth: "00"}},
		{"wrong proof", map[string]string{HeaderNonce: strings.Repeat("ab", 32),
			HeaderTime: strconv.FormatInt(time.Now().Unix(), 10), HeaderAuth: strings.Repeat("00", 32)}},
	} {
		r := httptest.NewRequest(http.MethodGet, wire.AddressPath, nil)
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized || strings.Contains(w.Body.String(), "qpn") {
			t.Errorf("%s: %d %q, want 401 and no record", c.name, w.Code, w.Body.String())
		}
	}
}
