package config

import (
	"strings"
)

// Client certificate modes, as TLS.ClientAuth. A client certificate is only
// ever requested to be verified against client_ca_file: identity.mtls trusts
// a certificate the listener passes on, so there is no mode that takes one
// unverified.
const (
	// ClientAuthNone asks for no client certificate.
	ClientAuthNone = "none"
	// ClientAuthVerifyIfGiven verifies a client certificate when the client
	// sends one; clients without one are served (and anonymous to mTLS).
	ClientAuthVerifyIfGiven = "verify_if_given"
	// ClientAuthRequire refuses the handshake of a client without a
	// certificate that client_ca_file verifies.
	ClientAuthRequire = "require"
)

// TLS makes the sidecar's listener serve HTTPS (the tls: section). The files
// are read at start and again whenever one changes (checked at most every
// few seconds, on a handshake), so rotated certificates are picked up
// without a restart.
type TLS struct {
	// CertFile and KeyFile are the server's certificate chain and key (PEM).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile holds the CAs (PEM) that client certificates must chain
	// to. Set, it turns on client certificates: the mTLS identity source
	// (identity.mtls) reads the SPIFFE ID of a verified one.
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth is none, verify_if_given or require (default: require when
	// client_ca_file is set, else none).
	ClientAuth string `yaml:"client_auth"`
	// MinVersion is "1.2" (default) or "1.3".
	MinVersion string `yaml:"min_version"`
}

// Mode is the client certificate mode, defaults applied.
func (t *TLS) Mode() string {
	switch {
	case t.ClientAuth != "":
		return t.ClientAuth
	case t.ClientCAFile != "":
		return ClientAuthRequire
	}
	return ClientAuthNone
}

func (t *TLS) validate(bad func(key, format string, args ...any)) { t.validateAt("tls", bad) }

// validateAt validates a TLS section found at key (tls, authzen.tls).
func (t *TLS) validateAt(key string, bad func(key, format string, args ...any)) {
	if t == nil {
		return
	}
	if t.CertFile == "" {
		bad(key+".cert_file", "required: the server's certificate chain (PEM)")
	}
	if t.KeyFile == "" {
		bad(key+".key_file", "required: the server's private key (PEM)")
	}
	switch t.ClientAuth {
	case "", ClientAuthNone:
	case ClientAuthVerifyIfGiven, ClientAuthRequire:
		if t.ClientCAFile == "" {
			bad(key+".client_ca_file", "required with client_auth %s: the CAs that verify client certificates", t.ClientAuth)
		}
	default:
		bad(key+".client_auth", "must be none, verify_if_given or require, not %q", t.ClientAuth)
	}
	if t.ClientAuth == ClientAuthNone && t.ClientCAFile != "" {
		bad(key+".client_auth", "is none, so client_ca_file would never be used")
	}
	switch t.MinVersion {
	case "", "1.2", "1.3":
	default:
		bad(key+".min_version", "must be 1.2 or 1.3, not %q", t.MinVersion)
	}
}

// Log configures writ's own log: JSON lines on stderr, one format everywhere,
// with the decision log's field names for ids (task_id, context_id,
// decision_id).
type Log struct {
	// Level is debug, info (default), warn or error.
	Level string `yaml:"level"`
}

// Log levels, as Log.Level.
var logLevels = []string{"debug", "info", "warn", "error"}

func (l *Log) validate(bad func(key, format string, args ...any)) {
	if l.Level == "" {
		return
	}
	for _, v := range logLevels {
		if strings.EqualFold(l.Level, v) {
			return
		}
	}
	bad("log.level", "must be debug, info, warn or error, not %q", l.Level)
}
