package identity

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/writ-authz/writ/task"
)

// staticEntry is what the static token file says about one token.
type staticEntry struct {
	AgentID        string   `yaml:"agent_id"`
	UserID         string   `yaml:"user_id"`
	Tenant         string   `yaml:"tenant"`
	Scopes         []string `yaml:"scopes"`
	Classification string   `yaml:"classification"`
}

// loadStatic reads the static token file. Tokens are kept only as SHA-256 hashes, so
// the lookup's timing says nothing about the tokens themselves. Error messages name an
// entry by its agent_id, never by its token.
func loadStatic(path string) (map[[sha256.Size]byte]Caller, error) {
	const key = "identity.static_tokens_file"
	var entries map[string]staticEntry
	if err := readYAML(path, &entries); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s: %s lists no tokens", key, path)
	}
	out := make(map[[sha256.Size]byte]Caller, len(entries))
	for tok, e := range entries {
		switch {
		case e.AgentID == "":
			return nil, fmt.Errorf("%s: an entry (user_id %q) has no agent_id", key, e.UserID)
		case tok == "" || strings.ContainsAny(tok, " \t\r\n"):
			return nil, fmt.Errorf("%s: the token of agent %q is empty or contains whitespace", key, e.AgentID)
		case len(tok) > maxTokenBytes:
			return nil, fmt.Errorf("%s: the token of agent %q is longer than %d bytes", key, e.AgentID, maxTokenBytes)
		}
		if e.Classification != "" {
			if _, err := task.ParseLevel(e.Classification); err != nil {
				return nil, fmt.Errorf("%s: agent %q: %w", key, e.AgentID, err)
			}
		}
		if looksLikeJWS(tok) {
			slog.Warn("identity: a static token looks like a JWT and will never match: JWTs are only ever verified as JWTs",
				"file", path, "agent_id", e.AgentID)
		}
		out[sha256.Sum256([]byte(tok))] = Caller{
			Authenticated:  true,
			Method:         MethodStatic,
			AgentID:        e.AgentID,
			UserID:         e.UserID,
			Tenant:         e.Tenant,
			Scopes:         e.Scopes,
			Classification: e.Classification,
		}
	}
	slog.Warn("identity: STATIC TOKENS ARE FOR DEVELOPMENT ONLY: they never expire and cannot be revoked without a restart; use JWT or mTLS in production",
		"file", path, "tokens", len(out))
	return out, nil
}

// readYAML decodes a YAML (or JSON, which YAML reads too) file into v, refusing fields
// v does not have, so a typo is an error at load rather than a silently missing scope.
func readYAML(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s is empty", path)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
