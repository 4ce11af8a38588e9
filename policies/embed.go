// Package policies holds writ's shipped Rego policies, their tests and their
// tuning data (data.json), and embeds them in the binary: they are the policy
// set of `writ serve`, `writ validate` and `writ eval` when the configuration
// has no policies: key (authz.LoadPolicyFS), so writ runs from any directory.
// `writ demo` writes FS to a temporary directory and loads the policies from
// there (it adds its own receiver to the callback allow-list).
package policies

import "embed"

// FS holds every shipped policy file (*.rego, tests included) and data.json, at
// the root of the file system.
//
//go:embed *.rego data.json
var FS embed.FS
