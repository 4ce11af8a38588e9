package wire

// DupByTokens is dupByTokens (json_dup_test.go), the token-walk oracle of
// duplicate keys, for the package's external tests.
var DupByTokens = dupByTokens
