package authz

//go:generate go run ./internal/fieldgen/cmd -root probeInput -out fields_probe_gen_test.go

// probeInput is a declaration of the policy input's kind that the field table
// is tried on: the members writ/v1 gains for the egress door (a top-level
// direction, the caller's chain_id and hops[], whose members are absent where
// the token does not carry them), beside a member of every kind the generator
// takes. Each is declared once, here; fields_probe_gen_test.go is what go
// generate makes of it, and TestFieldTableProbe checks that every member
// appears in the OPA value as in the JSON, in the value pruned to a path that
// reads it, and in the decision-cache key.
type probeInput struct {
	Version   string         `json:"version"`
	Direction string         `json:"direction"`
	Caller    probeCaller    `json:"caller" writ:"memo"`
	Target    probeTarget    `json:"target" writ:"memo,clone"`
	Push      *probePush     `json:"push,omitempty"`
	Record    *probeRecord   `json:"record"` // JSON writes null when nil
	Level     probeLevel     `json:"level"`
	Attempt   int64          `json:"attempt"`
	Labels    map[string]any `json:"labels"`
	Note      string         `json:"note,omitempty"`
	Hops      []probeHop     `json:"hops"`
	Ignored   string         `json:"-"`
}

type probeLevel string

type probeCaller struct {
	AgentID      string         `json:"agent_id"`
	ChainID      string         `json:"chain_id"`
	Hops         []probeHop     `json:"hops"`
	Scopes       []string       `json:"scopes"`
	Claims       map[string]any `json:"claims" writ:"digest=claimsDigest"`
	Verified     bool           `json:"verified"`
	claimsDigest [32]byte
}

type probeHop struct {
	AgentID        string         `json:"agent_id"`
	Scopes         []string       `json:"scopes,omitempty"`
	Classification string         `json:"classification,omitempty"`
	Tenant         string         `json:"tenant,omitempty"`
	Depth          int            `json:"depth,omitempty"`
	Delegated      bool           `json:"delegated,omitempty"`
	Extra          map[string]any `json:"extra,omitempty"`
	Origin         *probeOrigin   `json:"origin,omitempty"`
}

type probeOrigin struct {
	Tenant string `json:"tenant"`
}

type probeTarget struct {
	Name    string       `json:"name"`
	Tenants []string     `json:"tenants"`
	Skills  []probeSkill `json:"skills"`
	Owner   *probeOrigin `json:"owner,omitempty"`
	Limits  probeLimits  `json:"limits"`
}

type probeSkill struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
}

type probeLimits struct {
	Depth int32 `json:"depth"`
}

type probePush struct {
	URL      string `json:"url"`
	Port     int    `json:"port"`
	HasToken bool   `json:"has_token,omitempty"`
}

type probeRecord struct {
	State string `json:"state"`
}
