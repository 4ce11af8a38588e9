package task

// AgentCard is what an agent publishes about itself, in writ's own terms: enough to
// serve, rewrite and filter cards of any protocol version. Platform metadata (owner,
// tenants, classification) is deliberately not here: it comes from writ's config and
// never appears in a published card.
type AgentCard struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Version     string `json:"version,omitempty"`
	// ProtocolVersion is the version of the card's main interface.
	ProtocolVersion  string                `json:"protocol_version,omitempty"`
	Provider         *Provider             `json:"provider,omitempty"`
	DocumentationURL string                `json:"documentation_url,omitempty"`
	IconURL          string                `json:"icon_url,omitempty"`
	Interfaces       []Interface           `json:"interfaces,omitempty"`
	Capabilities     Capabilities          `json:"capabilities"`
	SecuritySchemes  []SecurityScheme      `json:"security_schemes,omitempty"`
	Security         []map[string][]string `json:"security,omitempty"`
	InputModes       []string              `json:"default_input_modes,omitempty"`
	OutputModes      []string              `json:"default_output_modes,omitempty"`
	Skills           []Skill               `json:"skills,omitempty"`
}

// Provider names the organisation behind an agent.
type Provider struct {
	Organization string `json:"organization,omitempty"`
	URL          string `json:"url,omitempty"`
}

// Interface is one endpoint an agent serves.
type Interface struct {
	URL             string `json:"url"`
	Binding         string `json:"binding"` // JSONRPC, HTTP+JSON, GRPC
	ProtocolVersion string `json:"protocol_version,omitempty"`
	Tenant          string `json:"tenant,omitempty"`
}

// Capabilities are the optional features an agent offers.
type Capabilities struct {
	Streaming         bool        `json:"streaming"`
	PushNotifications bool        `json:"push_notifications"`
	ExtendedCard      bool        `json:"extended_card"`
	Extensions        []Extension `json:"extensions,omitempty"`
}

// Extension is a protocol extension an agent supports.
type Extension struct {
	URI         string         `json:"uri"`
	Description string         `json:"description,omitempty"`
	Required    bool           `json:"required,omitempty"`
	Params      map[string]any `json:"params,omitempty"`
}

// SchemeKind is the family of an authentication scheme.
type SchemeKind string

// Scheme kinds.
const (
	SchemeAPIKey SchemeKind = "apikey"
	SchemeHTTP   SchemeKind = "http"
	SchemeOAuth2 SchemeKind = "oauth2"
	SchemeOIDC   SchemeKind = "openidconnect"
	SchemeMTLS   SchemeKind = "mtls"
)

// SecurityScheme is one way to authenticate to an agent.
type SecurityScheme struct {
	Name        string     `json:"name"`
	Kind        SchemeKind `json:"kind"`
	Description string     `json:"description,omitempty"`
	// HTTPScheme is the HTTP auth scheme (bearer, basic) for SchemeHTTP.
	HTTPScheme   string `json:"http_scheme,omitempty"`
	BearerFormat string `json:"bearer_format,omitempty"`
	// In and ParamName locate an API key (header, query, cookie).
	In        string `json:"in,omitempty"`
	ParamName string `json:"param_name,omitempty"`
	// OpenIDConnectURL is the discovery URL for SchemeOIDC.
	OpenIDConnectURL string `json:"openid_connect_url,omitempty"`
	// Flows is an OAuth2 flows object, kept as parsed.
	Flows map[string]any `json:"flows,omitempty"`
}

// Skill is one thing an agent can do.
type Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name,omitempty"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"input_modes,omitempty"`
	OutputModes []string `json:"output_modes,omitempty"`
}
