package server

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// TestWebhookIdleOutlastsTheAPIServer: the API server's webhook client
// drops idle connections after its transport's default; the webhook server
// keeps them longer, so it never closes one the API server is about to
// reuse (a refused write: "broken pipe").
func TestWebhookIdleOutlastsTheAPIServer(t *testing.T) {
	client := utilnet.SetTransportDefaults(&http.Transport{}).IdleConnTimeout
	if webhookIdleTimeout <= client {
		t.Errorf("the webhook server keeps idle connections %s, the API server's client %s: the server must keep them longer", webhookIdleTimeout, client)
	}
}

// TestWebhookServer: the server serves a registered hook over TLS, passes
// its started check, and closes a connection left idle after its idle
// timeout, not before.
func TestWebhookServer(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir)
	s := newWebhookServer("127.0.0.1", 0, dir)
	s.idle = 500 * time.Millisecond
	s.Register("/hook", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start() = %v after the context ended, want nil", err)
		}
	}()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = s.StartedChecker()(nil); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("the started check never passed: %v", err)
	}
	s.mu.Lock()
	addr := s.addr
	s.mu.Unlock()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // a test's own certificate
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close() //nolint:errcheck // closed by the server
	if _, err := io.WriteString(conn, "GET /hook HTTP/1.1\r\nHost: webhook\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("GET /hook = %d %q, want 200 ok", resp.StatusCode, body)
	}
	idleSince := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = r.ReadByte()
	kept := time.Since(idleSince)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("reading an idle connection: %v after %s, want the server to close it (EOF) after its idle timeout %s", err, kept, s.idle)
	}
	if kept < s.idle/2 || kept > 5*s.idle {
		t.Errorf("the server closed the idle connection after %s, want it kept about its idle timeout %s", kept, s.idle)
	}
}

// writeCert writes a self-signed serving certificate for 127.0.0.1 as
// tls.crt and tls.key into dir.
func writeCert(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSNames: []string{"webhook"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
}
