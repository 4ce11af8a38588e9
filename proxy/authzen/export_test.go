package authzen

// The package's tests are external (package authzen_test): they build writ
// through the one assembly, which imports this package. These are the parts
// of the package's own vocabulary they read.

type (
	// Result is one decision as the endpoints answer it.
	Result = result
	// SearchResponse is a Search API response.
	SearchResponse = searchResponse
)

// The batch semantics (§7.1.2.1).
const (
	ExecuteAll          = executeAll
	DenyOnFirstDeny     = denyOnFirstDeny
	PermitOnFirstPermit = permitOnFirstPermit
)

// SearchKinds are the search kinds, as their endpoints name them.
var SearchKinds = searchKinds

// Str is obj's string member k ("" when it is absent or not a string).
func Str(obj map[string]any, k string) string { return str(obj, k) }
