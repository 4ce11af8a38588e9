package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/policies"
)

// embeddedName names the shipped policies embedded in the binary in
// Policy.Files, logs and errors.
const embeddedName = "embedded"

// loadPolicy loads cfg's policy set: the files under policies:, or, when the
// key is not set, the shipped policies embedded in the binary (so writ runs
// from any directory).
func loadPolicy(ctx context.Context, cfg *config.Config, opt authz.LoadOptions) (*authz.Policy, error) {
	if cfg.EmbeddedPolicies() {
		return authz.LoadPolicyFS(ctx, policies.FS, embeddedName, opt)
	}
	p, err := authz.LoadPolicy(ctx, cfg.Policies, opt)
	if err != nil {
		return nil, fmt.Errorf("policies %v: %w", cfg.Policies, err)
	}
	return p, nil
}

// policySource says where cfg's policies come from, for logs and messages.
func policySource(cfg *config.Config) string {
	if cfg.EmbeddedPolicies() {
		return "the shipped policies embedded in writ"
	}
	return strings.Join(cfg.Policies, ", ")
}
