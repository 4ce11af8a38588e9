package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/writ-authz/writ/config"
)

// tlsFiles serves the tls: section's certificate and client CAs, read again
// when one of the files changes (checked at most every tlsRecheck, on a
// handshake): certificates rotated by cert-manager or a SPIFFE agent are
// picked up without a restart. A file that no longer loads keeps the last
// good one serving, and says so in the log.
type tlsFiles struct {
	cfg  config.TLS
	log  *slog.Logger
	base *tls.Config

	mu      sync.Mutex
	checked time.Time
	stamp   string // the files' sizes and modification times
	current *tls.Config
}

// tlsRecheck is how often the files are looked at again.
const tlsRecheck = 5 * time.Second

// newServerTLS is the listener's TLS configuration: TLS 1.2 or 1.3, HTTP/1.1
// (the sidecar's request handling, smuggling checks included, is HTTP/1.1's),
// and client certificates verified against client_ca_file when asked for.
// A client certificate is never taken unverified: identity.mtls believes
// the certificates the listener passes on.
func newServerTLS(cfg config.TLS, log *slog.Logger) (*tls.Config, error) {
	f := &tlsFiles{cfg: cfg, log: log}
	f.base = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if cfg.MinVersion == "1.3" {
		f.base.MinVersion = tls.VersionTLS13
	}
	switch cfg.Mode() {
	case config.ClientAuthRequire:
		f.base.ClientAuth = tls.RequireAndVerifyClientCert
	case config.ClientAuthVerifyIfGiven:
		f.base.ClientAuth = tls.VerifyClientCertIfGiven
	default:
		f.base.ClientAuth = tls.NoClientCert
	}
	if err := f.load(); err != nil {
		return nil, err
	}
	out := f.base.Clone()
	out.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return f.config(), nil }
	// The outer config answers nothing itself; it is here for the listener
	// (and for http.Server, which reads NextProtos from it).
	out.Certificates = f.current.Certificates
	out.ClientCAs = f.current.ClientCAs
	return out, nil
}

// config is the configuration of one handshake: the files as they are now.
func (f *tlsFiles) config() *tls.Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) >= tlsRecheck {
		f.checked = time.Now()
		if st := f.stampNow(); st != f.stamp {
			if err := f.loadLocked(); err != nil {
				f.log.Error("tls: the changed certificate files do not load; the previous ones keep serving", "error", err)
			} else {
				f.log.Info("tls: certificate files reloaded", "cert_file", f.cfg.CertFile, "client_ca_file", f.cfg.ClientCAFile)
			}
		}
	}
	return f.current
}

func (f *tlsFiles) load() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked = time.Now()
	return f.loadLocked()
}

func (f *tlsFiles) loadLocked() error {
	stamp := f.stampNow()
	cert, err := tls.LoadX509KeyPair(f.cfg.CertFile, f.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("tls.cert_file, tls.key_file: %w", err)
	}
	c := f.base.Clone()
	c.Certificates = []tls.Certificate{cert}
	if f.cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(f.cfg.ClientCAFile)
		if err != nil {
			return fmt.Errorf("tls.client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return errors.New("tls.client_ca_file: no PEM certificate in " + f.cfg.ClientCAFile)
		}
		c.ClientCAs = pool
	}
	f.current, f.stamp = c, stamp
	return nil
}

// stampNow is the files' sizes and modification times.
func (f *tlsFiles) stampNow() string {
	s := ""
	for _, p := range []string{f.cfg.CertFile, f.cfg.KeyFile, f.cfg.ClientCAFile} {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil {
			s += fmt.Sprintf("%s:%d:%d;", p, st.Size(), st.ModTime().UnixNano())
		} else {
			s += p + ":missing;"
		}
	}
	return s
}
