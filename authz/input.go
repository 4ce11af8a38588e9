package authz

import (
	"hash/maphash"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/task"
)

//go:generate go run ./internal/fieldgen/cmd -root Input -out fields_gen.go -paths inputpaths/paths_gen.go

// InputVersion is the version of the policy input document. Change the document
// only additively; compliance writes Rego against it.
const InputVersion = "writ/v1"

// Input is the writ/v1 policy input. Its JSON field names are the policy contract
// (docs/policy-input.md). These types and their tags are the one declaration
// of its members: the conversion to an OPA value (Value, without a JSON round
// trip), the pruning to the paths a policy reads and the decision-cache key
// are generated from them into fields_gen.go (go generate ./authz;
// TestFieldsGenerated fails when it is stale, TestFieldTable checks every
// member against its JSON form). A new member is a field here, with its json
// tag, and the line of BuildInput that fills it (a list never nil: JSON would
// say null where the policy sees []). The writ tag says how a member is
// served: memo (its type's whole value is cached by its content), clone (the
// residuals keep a deep copy of it), digest=name (the unexported member name
// caches the free-form object's digest).
type Input struct {
	Version string `json:"version"`
	// Direction is "ingress" (a request to an agent writ protects) or
	// "egress" (a call a protected agent makes through writ's egress
	// listener).
	Direction string        `json:"direction"`
	Operation string        `json:"operation"`
	Protocol  InputProtocol `json:"protocol"`
	Caller    InputCaller   `json:"caller" writ:"memo"`
	Target    InputTarget   `json:"target" writ:"memo,clone"`
	Task      InputTask     `json:"task"`
	Push      *InputPush    `json:"push,omitempty"`
	Request   InputRequest  `json:"request"`
	// Egress is set on egress decisions only: what the call is, beyond its
	// caller and target.
	Egress *InputEgress `json:"egress,omitempty"`
}

// InputEgress describes a call the protected agent makes through writ's
// egress listener.
type InputEgress struct {
	// Root: the call names no inbound request (no Writ-Parent): it starts a
	// new delegation at this agent, on a credential the agent presented.
	Root bool `json:"root"`
}

// InputProtocol says which protocol carried the request.
type InputProtocol struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Binding string `json:"binding"`
	Method  string `json:"method"`
}

// InputCaller is who authenticated.
type InputCaller struct {
	Authenticated bool     `json:"authenticated"`
	Method        string   `json:"method"`
	Issuer        string   `json:"issuer"`
	AgentID       string   `json:"agent_id"`
	UserID        string   `json:"user_id"`
	Tenant        string   `json:"tenant"`
	Scopes        []string `json:"scopes"`
	Chain         []string `json:"delegation_chain"`
	// Classification is the highest data classification the credential
	// allows, "" when it names none.
	Classification string `json:"classification"`
	// ChainID is the delegation's chain id (the token's txn), "" when none.
	ChainID string `json:"chain_id"`
	// Hops is the authority each actor of the chain held when it delegated,
	// oldest first, the caller last; empty when the token records none.
	Hops   []InputHop     `json:"hops"`
	Claims map[string]any `json:"claims" writ:"digest=claimsDigest"`
	// claimsDigest is identity's digest of Claims (zero: compute when needed).
	claimsDigest [32]byte
}

// InputHop is what one actor of the delegation chain was granted, as its act
// claim records it: tenant and classification "" where it records none, and
// scopes_recorded false (scopes empty) where it records no scope.
type InputHop struct {
	AgentID        string   `json:"agent_id"`
	Scopes         []string `json:"scopes"`
	ScopesRecorded bool     `json:"scopes_recorded"`
	Tenant         string   `json:"tenant"`
	Classification string   `json:"classification"`
}

// InputTarget is the protected agent's platform metadata, from writ's config.
type InputTarget struct {
	Name              string       `json:"name"`
	Owner             string       `json:"owner"`
	Tenants           []string     `json:"tenants"`
	MaxClassification string       `json:"max_data_classification"`
	SecuritySchemes   []string     `json:"security_schemes"`
	Skills            []InputSkill `json:"skills"`
	PushNotifications bool         `json:"push_notifications"`
}

// InputSkill is one skill of the target.
type InputSkill struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
}

// InputTask is the task the request creates or acts on.
type InputTask struct {
	ID             string          `json:"id"`
	ContextID      string          `json:"context_id"`
	State          string          `json:"state"`
	Owner          *InputOwner     `json:"owner,omitempty"`
	Classification string          `json:"data_classification"`
	Parts          task.PartCounts `json:"parts"`
	FileURIs       []string        `json:"file_uris"`
	Skill          string          `json:"skill"`
}

// InputOwner is who created the task, from writ's lifecycle record.
type InputOwner struct {
	AgentID string `json:"agent_id"`
	Tenant  string `json:"tenant"`
	UserID  string `json:"user_id"`
}

// InputPush is a push-notification config being set.
type InputPush struct {
	// URL is the callback's origin, scheme://host[:port] ("" when the URL does
	// not parse): never its userinfo, path, query or fragment, which may carry
	// a credential (a signed webhook) that a reason quoting the URL would put
	// in the decision log. The policy decides on the origin.
	URL        string `json:"url"`
	Scheme     string `json:"scheme"`
	Host       string `json:"host"`
	Port       int    `json:"port"`
	HasToken   bool   `json:"has_token"`
	AuthScheme string `json:"auth_scheme"`
}

// InputRequest is the HTTP request as writ received it.
type InputRequest struct {
	Method        string `json:"method"`
	Path          string `json:"path"`
	Host          string `json:"host"`
	SourceAddress string `json:"source_address"`
	// Tenant is the tenant the request names (A2A 1.0: the /{tenant}/ path
	// segment or params.tenant), "" when it names none.
	Tenant string `json:"tenant"`
}

// Target is a protected agent's platform metadata as configured. Callers never
// supply it and it never appears in a published card.
type Target struct {
	Name              string       `yaml:"name" json:"name"`
	Owner             string       `yaml:"owner" json:"owner"`
	Tenants           []string     `yaml:"tenants" json:"tenants"`
	MaxClassification task.Level   `yaml:"max_data_classification" json:"max_data_classification"`
	SecuritySchemes   []string     `yaml:"security_schemes" json:"security_schemes"`
	Skills            []task.Skill `yaml:"skills" json:"skills"`
	PushNotifications bool         `yaml:"push_notifications" json:"push_notifications"`
}

// TargetOf is a configured agent's platform metadata, as the input carries it.
func TargetOf(a *config.Agent) *Target {
	return &Target{Name: a.Name, Owner: a.Owner, Tenants: a.Tenants, MaxClassification: a.MaxDataClassification,
		SecuritySchemes: a.SecuritySchemes, Skills: a.Skills}
}

// HTTPInfo is what the input records of the HTTP request itself.
type HTTPInfo struct {
	Method, Path, Host, RemoteAddr string
}

// Facts are everything a decision is made from.
type Facts struct {
	Request *task.Request
	Caller  identity.Caller
	Target  *Target
	// Record is writ's lifecycle record of the task, nil when there is none.
	Record *task.Task
	HTTP   HTTPInfo
	// DefaultClassification applies when neither the request nor the token
	// declares one (default internal).
	DefaultClassification task.Level
	// Direction is DirectionIngress (the default) or DirectionEgress.
	Direction string
	// Root: an egress call that names no inbound request (input.egress.root).
	Root bool
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// The values of input.direction.
const (
	DirectionIngress = "ingress"
	DirectionEgress  = "egress"
)

// inputHops is the chain's hops as the input carries them (never nil).
func inputHops(hops []identity.Hop) []InputHop {
	out := make([]InputHop, len(hops))
	for i, h := range hops {
		out[i] = InputHop{AgentID: h.AgentID, Scopes: nonNil(h.Scopes), ScopesRecorded: h.HasScopes, Tenant: h.Tenant,
			Classification: h.Classification}
	}
	return out
}

// BuildInput assembles the writ/v1 input document.
func BuildInput(f *Facts) *Input {
	req := f.Request
	in := &Input{
		Version:   InputVersion,
		Direction: f.Direction,
		Operation: string(req.Operation),
		Protocol: InputProtocol{Name: req.Protocol.Name, Version: req.Protocol.Version,
			Binding: string(req.Protocol.Binding), Method: req.Protocol.Method},
		Caller: InputCaller{Authenticated: f.Caller.Authenticated, Method: f.Caller.Method, Issuer: f.Caller.Issuer,
			AgentID: f.Caller.AgentID, UserID: f.Caller.UserID, Tenant: f.Caller.Tenant,
			Scopes: nonNil(f.Caller.Scopes), Chain: nonNil(f.Caller.Chain), Claims: f.Caller.Claims,
			Classification: f.Caller.Classification, ChainID: f.Caller.ChainID, Hops: inputHops(f.Caller.Hops),
			claimsDigest: f.Caller.ClaimsDigest},
		Request: InputRequest{Method: f.HTTP.Method, Path: f.HTTP.Path, Host: f.HTTP.Host, SourceAddress: sourceIP(f.HTTP.RemoteAddr),
			Tenant: req.Tenant},
	}
	if in.Direction == "" {
		in.Direction = DirectionIngress
	}
	if in.Direction == DirectionEgress {
		in.Egress = &InputEgress{Root: f.Root}
	}
	if in.Caller.Method == "" {
		in.Caller.Method = "anonymous"
	}
	if in.Caller.Claims == nil {
		in.Caller.Claims = map[string]any{}
	}
	if t := f.Target; t != nil {
		in.Target = InputTarget{Name: t.Name, Owner: t.Owner, Tenants: nonNil(t.Tenants),
			MaxClassification: string(t.MaxClassification), SecuritySchemes: nonNil(t.SecuritySchemes),
			Skills: make([]InputSkill, 0, len(t.Skills)), PushNotifications: t.PushNotifications}
		for _, s := range t.Skills {
			in.Target.Skills = append(in.Target.Skills, InputSkill{ID: s.ID, Tags: nonNil(s.Tags)})
		}
	} else {
		in.Target = InputTarget{Tenants: []string{}, SecuritySchemes: []string{}, Skills: []InputSkill{}}
	}
	level := task.Max(req.Classification, task.Level(f.Caller.Classification))
	if level == "" {
		level = f.DefaultClassification
		if level == "" {
			level = task.Internal
		}
	}
	in.Task = InputTask{ID: req.TaskID, ContextID: req.ContextID, Classification: string(level), FileURIs: []string{}}
	if m := req.Message; m != nil {
		in.Task.Parts = m.Parts
		in.Task.FileURIs = nonNil(m.FileURIs)
	}
	if r := f.Record; r != nil {
		in.Task.State = string(r.State)
		in.Task.Owner = &InputOwner{AgentID: r.Owner.AgentID, Tenant: r.Owner.Tenant, UserID: r.Owner.UserID}
		if in.Task.ContextID == "" {
			in.Task.ContextID = r.ContextID
		}
	}
	if p := req.Push; p != nil {
		in.Push = pushInput(p)
	}
	return in
}

// pushInput splits a callback URL into what the callback policy reads. Hosts are
// lower-cased so allow-list matching is exact but not case-sensitive.
func pushInput(p *task.PushConfig) *InputPush {
	out := &InputPush{HasToken: p.Token != "", AuthScheme: p.AuthScheme}
	out.URL, out.Scheme, out.Host, out.Port = splitURL(p.URL)
	return out
}

// parsedURL is one entry of urlCache.
type parsedURL struct {
	url, origin, scheme, host string
	port                      int
}

// urlCache remembers the last callback URLs split (a caller sends the same
// callback URL again and again): a direct-mapped table, each slot replaced
// whole, so it needs no lock and its size is fixed.
var (
	urlCache [256]atomic.Pointer[parsedURL]
	urlSeed  = maphash.MakeSeed()
)

// splitURL is a callback URL's origin (scheme://host[:port], lower-cased, the
// port as written), scheme, host and port (defaulted from the scheme).
func splitURL(raw string) (origin, scheme, host string, port int) {
	slot := &urlCache[maphash.String(urlSeed, raw)%uint64(len(urlCache))]
	if e := slot.Load(); e != nil && e.url == raw {
		return e.origin, e.scheme, e.host, e.port
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", "", 0
	}
	scheme = strings.ToLower(u.Scheme)
	host = strings.ToLower(u.Hostname())
	if p := u.Port(); p != "" {
		port, _ = strconv.Atoi(p)
	} else {
		switch scheme {
		case "https":
			port = 443
		case "http":
			port = 80
		}
	}
	if scheme != "" || host != "" {
		// u.Host without userinfo; an IPv6 literal keeps its brackets.
		origin = scheme + "://" + strings.ToLower(u.Host)
	}
	if len(raw) <= 2048 {
		slot.Store(&parsedURL{url: raw, origin: origin, scheme: scheme, host: host, port: port})
	}
	return origin, scheme, host, port
}

func sourceIP(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}
