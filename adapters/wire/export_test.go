package wire

import "github.com/writ-authz/writ/internal/jsonkeys/jsonkeystest"

// DupByTokens is the token-walk oracle of duplicate keys, for the package's
// external tests.
var DupByTokens = jsonkeystest.RepeatsByTokens
