// Package authz is writ's decision point: it builds the writ/v1 policy input from an
// internal request, the verified caller, the target agent's platform metadata and
// the task's lifecycle record, evaluates the OPA policy on it (with a decision cache
// in front), and reloads policies atomically. The admission core
// (proxy.Core.Admit) calls Engine.Decide for every front door — the sidecar,
// Envoy's ext_proc and ext_authz — and none of them knows Rego.
package authz
