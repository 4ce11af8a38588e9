// Package policies holds writ's shipped Rego policies, their tests and their
// tuning data (data.json), and embeds them in the binary. `writ demo` writes FS
// to a temporary directory and loads the policies from there, so the demo works
// outside a checkout of the repository.
package policies

import "embed"

// FS holds every shipped policy file (*.rego, tests included) and data.json, at
// the root of the file system.
//
//go:embed *.rego data.json
var FS embed.FS
