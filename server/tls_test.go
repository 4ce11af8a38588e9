package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/internal/syncbuf"
)

// testPKI is a CA and what it signs, written as PEM files in dir.
type testPKI struct {
	t    *testing.T
	dir  string
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	// CAFile is the CA's certificate (PEM).
	CAFile string
}

func newPKI(t *testing.T, dir, name string) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p := &testPKI{t: t, dir: dir, key: key, cert: cert, CAFile: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, p.CAFile, "CERTIFICATE", der)
	return p
}

// issue signs a leaf certificate: a server's for 127.0.0.1, or a client's
// with the SPIFFE ID as its URI SAN. It returns the cert and key files and
// the tls.Certificate.
func (p *testPKI) issue(name string, server bool, spiffe string) (certFile, keyFile string, pair tls.Certificate) {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		u, err := url.Parse(spiffe)
		if err != nil {
			p.t.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+".pem"), filepath.Join(p.dir, name+"-key.pem")
	writePEM(p.t, certFile, "CERTIFICATE", der)
	writePEM(p.t, keyFile, "EC PRIVATE KEY", kder)
	pair, err = tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		p.t.Fatal(err)
	}
	return certFile, keyFile, pair
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

const investigatorID = "spiffe://bank.ae/agent/payments-investigator"

// TestTLSListenerMTLSCaller: with tls: set, the sidecar's listener serves
// HTTPS with the configured certificate and verifies client certificates
// against client_ca_file; a caller presenting a real client certificate with
// a SPIFFE ID is identified by it (identity.mtls: its mapping gives the
// tenant and scopes), admitted by the shipped policy to an agent that
// accepts mtls, and the agent receives that caller in Writ-Caller. A client
// without a certificate, or with one another CA signed (same SPIFFE ID),
// does not complete the handshake; a plain-HTTP request is refused.
func TestTLSListenerMTLSCaller(t *testing.T) {
	dir := t.TempDir()
	ca := newPKI(t, dir, "bank")
	serverCert, serverKey, _ := ca.issue("writ", true, "")
	_, _, client := ca.issue("investigator", false, investigatorID)
	rogue := newPKI(t, dir, "rogue")
	_, _, forged := rogue.issue("forged", false, investigatorID)

	agent, err := seedagents.StartSanctions(seedagents.WithName("sanctions-screening-agent"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	mapping := filepath.Join(dir, "spiffe.yaml")
	os.WriteFile(mapping, []byte(investigatorID+": {agent_id: payments-investigator, tenant: wholesale, scopes: [delegate]}\n"), 0o600)
	decisions := filepath.Join(dir, "decisions.jsonl")
	cfg, err := config.Parse([]byte(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
store: {kind: memory}
decision_log: {output: ` + decisions + `}
tls:
  cert_file: ` + serverCert + `
  key_file: ` + serverKey + `
  client_ca_file: ` + ca.CAFile + `
identity:
  mtls: {trust_domain: bank.ae, mapping_file: ` + mapping + `}
agents:
  - name: sanctions-screening-agent
    upstream: ` + agent.URL + `
    tenants: [wholesale]
    max_data_classification: restricted
    security_schemes: [mtls]
`))
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Warnings(); len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
	var logBuf syncbuf.Buffer
	sc, err := New(t.Context(), cfg, WithLogger(NewLogger(&logBuf, slog.LevelInfo)))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, sc)
	if !strings.HasPrefix(sc.URL(), "https://") {
		t.Fatalf("URL %s", sc.URL())
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	newClient := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}}}
	}
	send := func(c *http.Client) (*http.Response, error) {
		body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"Screen Acme Trading FZE"}]}}}`
		return c.Post(sc.URL()+"/", "application/json", strings.NewReader(body))
	}

	resp, err := send(newClient(client))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"result"`) || resp.TLS == nil {
		t.Fatalf("mTLS caller: %d %s", resp.StatusCode, raw)
	}
	var got map[string]any
	for _, o := range agent.Requests() {
		if o.Method == "message/send" {
			if err := json.Unmarshal([]byte(o.Caller), &got); err != nil {
				t.Fatalf("Writ-Caller %q: %v", o.Caller, err)
			}
		}
	}
	if got["method"] != "mtls" || got["agent_id"] != "payments-investigator" || got["tenant"] != "wholesale" || got["authenticated"] != true {
		t.Fatalf("the agent received Writ-Caller %v", got)
	}

	for name, c := range map[string]*http.Client{
		"no client certificate":           newClient(),
		"a certificate another CA signed": newClient(forged),
	} {
		if resp, err := send(c); err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %d, want a refused handshake", name, resp.StatusCode)
		}
	}
	plain, err := http.Post("http://"+strings.TrimPrefix(sc.URL(), "https://")+"/", "application/json", strings.NewReader("{}"))
	if err == nil {
		if plain.StatusCode < 400 {
			t.Errorf("plain HTTP on the TLS listener: %d", plain.StatusCode)
		}
		plain.Body.Close()
	}
	shutdown(t, sc)
	// The decision log names the caller by its certificate too.
	logged, _ := os.ReadFile(decisions)
	if !strings.Contains(string(logged), `"method":"mtls"`) || !strings.Contains(string(logged), `"agent_id":"payments-investigator"`) {
		t.Errorf("decision log:\n%s", logged)
	}
	// Every line of writ's own log is JSON (the handshake failures included).
	for _, line := range strings.Split(strings.TrimSpace(logBuf.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("not a JSON log line: %s", line)
		}
	}
}

// TestTLSVerifyIfGiven: with client_auth verify_if_given, a client without
// a certificate is served (anonymous to mTLS: the shipped policy answers
// 401), and one with a verified certificate is identified.
func TestTLSVerifyIfGiven(t *testing.T) {
	dir := t.TempDir()
	ca := newPKI(t, dir, "bank")
	serverCert, serverKey, _ := ca.issue("writ", true, "")
	_, _, client := ca.issue("investigator", false, investigatorID)
	tc, err := newServerTLS(config.TLS{CertFile: serverCert, KeyFile: serverKey, ClientCAFile: ca.CAFile,
		ClientAuth: config.ClientAuthVerifyIfGiven}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tc)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) > 0 {
			io.WriteString(w, r.TLS.PeerCertificates[0].URIs[0].String())
			return
		}
		io.WriteString(w, "anonymous")
	})}
	go srv.Serve(ln)
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	for want, certs := range map[string][]tls.Certificate{"anonymous": nil, investigatorID: {client}} {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}}}
		resp, err := c.Get("https://" + ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(raw) != want {
			t.Errorf("got %q, want %q", raw, want)
		}
	}
	// A certificate file that changes is read again (rotation).
	f := &tlsFiles{cfg: config.TLS{CertFile: serverCert, KeyFile: serverKey}, log: slog.New(slog.DiscardHandler), base: &tls.Config{}}
	if err := f.load(); err != nil {
		t.Fatal(err)
	}
	before := f.current
	newCert, newKey, _ := ca.issue("writ-rotated", true, "")
	raw, _ := os.ReadFile(newCert)
	os.WriteFile(serverCert, raw, 0o600)
	raw, _ = os.ReadFile(newKey)
	os.WriteFile(serverKey, raw, 0o600)
	f.checked = time.Time{}
	if f.config() == before {
		t.Error("a rotated certificate was not read again")
	}
}
