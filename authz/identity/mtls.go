package identity

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// mtlsEntry is what the mapping file says about one SPIFFE ID.
type mtlsEntry struct {
	AgentID string   `yaml:"agent_id"`
	Tenant  string   `yaml:"tenant"`
	Scopes  []string `yaml:"scopes"`
}

// mtlsSource identifies callers by the SPIFFE ID in their client certificate.
type mtlsSource struct {
	trustDomain string
	mapping     map[string]mtlsEntry // by SPIFFE ID
}

func newMTLS(cfg MTLSConfig) (*mtlsSource, error) {
	m := &mtlsSource{trustDomain: cfg.TrustDomain}
	if cfg.MappingFile == "" {
		return m, nil
	}
	const key = "identity.mtls.mapping_file"
	var raw map[string]mtlsEntry
	if err := readYAML(cfg.MappingFile, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	m.mapping = make(map[string]mtlsEntry, len(raw))
	for id, e := range raw {
		u, err := url.Parse(id)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: not a URI", key, id)
		}
		td, err := spiffeTrustDomain(u)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", key, id, err)
		}
		if td != m.trustDomain {
			return nil, fmt.Errorf("%s: %q: trust domain %q is not %q", key, id, td, m.trustDomain)
		}
		m.mapping[u.String()] = e
	}
	return m, nil
}

// identify maps a verified leaf certificate to a Caller. The certificate must carry
// exactly one spiffe URI SAN (as the X.509-SVID spec requires) in the trust domain.
func (m *mtlsSource) identify(cert *x509.Certificate) (Caller, error) {
	var spiffe *url.URL
	for _, u := range cert.URIs {
		if !strings.EqualFold(u.Scheme, "spiffe") {
			continue
		}
		if spiffe != nil {
			return Caller{}, fmt.Errorf("%w: more than one SPIFFE ID", ErrCertificate)
		}
		spiffe = u
	}
	if spiffe == nil {
		return Caller{}, fmt.Errorf("%w: no spiffe URI SAN", ErrCertificate)
	}
	td, err := spiffeTrustDomain(spiffe)
	if err != nil {
		return Caller{}, fmt.Errorf("%w: %w", ErrCertificate, err)
	}
	if td != m.trustDomain {
		return Caller{}, fmt.Errorf("%w: trust domain %q is not %q", ErrCertificate, trunc(td), m.trustDomain)
	}
	id := spiffe.String()
	e := m.mapping[id]
	agent := e.AgentID
	if agent == "" {
		agent = id
	}
	return Caller{
		Authenticated: true,
		Method:        MethodMTLS,
		Issuer:        "spiffe://" + td,
		AgentID:       agent,
		Tenant:        e.Tenant,
		Scopes:        e.Scopes,
		Expires:       cert.NotAfter,
	}, nil
}

// spiffeTrustDomain checks a workload SPIFFE ID (spiffe://trust-domain/path) and
// returns its trust domain.
func spiffeTrustDomain(u *url.URL) (string, error) {
	switch {
	case u.Scheme != "spiffe":
		return "", errors.New("scheme is not spiffe")
	case u.User != nil || u.Port() != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return "", errors.New("a SPIFFE ID has no user, port, query or fragment")
	case u.Path == "" || u.Path == "/":
		return "", errors.New("a workload SPIFFE ID needs a path")
	}
	if err := validTrustDomain(u.Host); err != nil {
		return "", err
	}
	return u.Host, nil
}

// validTrustDomain checks a trust domain name as the SPIFFE spec defines it:
// lowercase letters, digits, dots, dashes and underscores.
func validTrustDomain(td string) error {
	if td == "" {
		return errors.New("required")
	}
	if strings.Contains(td, "://") {
		return fmt.Errorf("%q: give the trust domain alone, without spiffe://", td)
	}
	for _, c := range td {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("%q: a trust domain has only lowercase letters, digits, '.', '-' and '_'", td)
		}
	}
	return nil
}
