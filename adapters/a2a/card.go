package a2a

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/writ-authz/writ/task"
)

// Card paths.
const (
	CardPath       = "/.well-known/agent-card.json"
	LegacyCardPath = "/.well-known/agent.json"
)

type cardProvider struct {
	Organization string `json:"organization,omitempty"`
	URL          string `json:"url,omitempty"`
}

type cardExtension struct {
	URI         string         `json:"uri"`
	Description string         `json:"description,omitempty"`
	Required    bool           `json:"required,omitempty"`
	Params      map[string]any `json:"params,omitempty"`
}

type cardSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

// card03 is the A2A 0.3 AgentCard.
type card03 struct {
	ProtocolVersion    string `json:"protocolVersion"`
	Name               string `json:"name"`
	Description        string `json:"description"`
	URL                string `json:"url"`
	PreferredTransport string `json:"preferredTransport,omitempty"`
	AdditionalIfaces   []struct {
		URL       string `json:"url"`
		Transport string `json:"transport"`
	} `json:"additionalInterfaces,omitempty"`
	IconURL          string        `json:"iconUrl,omitempty"`
	Provider         *cardProvider `json:"provider,omitempty"`
	Version          string        `json:"version"`
	DocumentationURL string        `json:"documentationUrl,omitempty"`
	Capabilities     struct {
		Streaming         bool            `json:"streaming,omitempty"`
		PushNotifications bool            `json:"pushNotifications,omitempty"`
		Extensions        []cardExtension `json:"extensions,omitempty"`
	} `json:"capabilities"`
	SecuritySchemes    map[string]scheme03   `json:"securitySchemes,omitempty"`
	Security           []map[string][]string `json:"security,omitempty"`
	DefaultInputModes  []string              `json:"defaultInputModes"`
	DefaultOutputModes []string              `json:"defaultOutputModes"`
	Skills             []cardSkill           `json:"skills"`
	SupportsExtended   bool                  `json:"supportsAuthenticatedExtendedCard,omitempty"`
}

type scheme03 struct {
	Type             string         `json:"type"`
	Description      string         `json:"description,omitempty"`
	Scheme           string         `json:"scheme,omitempty"`
	BearerFormat     string         `json:"bearerFormat,omitempty"`
	In               string         `json:"in,omitempty"`
	Name             string         `json:"name,omitempty"`
	OpenIDConnectURL string         `json:"openIdConnectUrl,omitempty"`
	Flows            map[string]any `json:"flows,omitempty"`
}

// card10 is the A2A 1.0 AgentCard.
type card10 struct {
	Name                string              `json:"name"`
	Description         string              `json:"description"`
	SupportedInterfaces []iface10           `json:"supportedInterfaces"`
	Provider            *cardProvider       `json:"provider,omitempty"`
	Version             string              `json:"version"`
	DocumentationURL    string              `json:"documentationUrl,omitempty"`
	Capabilities        caps10              `json:"capabilities"`
	SecuritySchemes     map[string]scheme10 `json:"securitySchemes,omitempty"`
	SecurityReqs        []securityReq10     `json:"securityRequirements,omitempty"`
	DefaultInputModes   []string            `json:"defaultInputModes"`
	DefaultOutputModes  []string            `json:"defaultOutputModes"`
	Skills              []cardSkill         `json:"skills"`
	IconURL             string              `json:"iconUrl,omitempty"`
}

type iface10 struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	Tenant          string `json:"tenant,omitempty"`
	ProtocolVersion string `json:"protocolVersion"`
}

type caps10 struct {
	Streaming         bool            `json:"streaming,omitempty"`
	PushNotifications bool            `json:"pushNotifications,omitempty"`
	Extensions        []cardExtension `json:"extensions,omitempty"`
	ExtendedAgentCard bool            `json:"extendedAgentCard,omitempty"`
}

type securityReq10 struct {
	Schemes map[string]struct {
		List []string `json:"list"`
	} `json:"schemes"`
}

type scheme10 struct {
	APIKey *struct {
		Description string `json:"description,omitempty"`
		Location    string `json:"location"`
		Name        string `json:"name"`
	} `json:"apiKeySecurityScheme,omitempty"`
	HTTP *struct {
		Description  string `json:"description,omitempty"`
		Scheme       string `json:"scheme"`
		BearerFormat string `json:"bearerFormat,omitempty"`
	} `json:"httpAuthSecurityScheme,omitempty"`
	OAuth2 *struct {
		Description       string         `json:"description,omitempty"`
		Flows             map[string]any `json:"flows,omitempty"`
		OAuth2MetadataURL string         `json:"oauth2MetadataUrl,omitempty"`
	} `json:"oauth2SecurityScheme,omitempty"`
	OIDC *struct {
		Description      string `json:"description,omitempty"`
		OpenIDConnectURL string `json:"openIdConnectUrl"`
	} `json:"openIdConnectSecurityScheme,omitempty"`
	MTLS *struct {
		Description string `json:"description,omitempty"`
	} `json:"mtlsSecurityScheme,omitempty"`
}

var schemeKind03 = map[string]task.SchemeKind{
	"apiKey": task.SchemeAPIKey, "http": task.SchemeHTTP, "oauth2": task.SchemeOAuth2,
	"openIdConnect": task.SchemeOIDC, "mutualTLS": task.SchemeMTLS,
}

// ParseCard parses an agent card of either version; a card with
// supportedInterfaces is 1.0, one with a top-level url is 0.3.
func ParseCard(body []byte) (*task.AgentCard, error) {
	var probe struct {
		SupportedInterfaces json.RawMessage `json:"supportedInterfaces"`
		URL                 string          `json:"url"`
		Name                string          `json:"name"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, fmt.Errorf("agent card is not a JSON object: %w", err)
	}
	if probe.Name == "" {
		return nil, fmt.Errorf("agent card has no name")
	}
	if len(probe.SupportedInterfaces) > 0 {
		return parseCard10(body)
	}
	if probe.URL != "" {
		return parseCard03(body)
	}
	return nil, fmt.Errorf("agent card %q has neither supportedInterfaces (1.0) nor url (0.3)", probe.Name)
}

func skillsIn(ss []cardSkill) []task.Skill {
	out := make([]task.Skill, 0, len(ss))
	for _, s := range ss {
		out = append(out, task.Skill{ID: s.ID, Name: s.Name, Description: s.Description, Tags: s.Tags,
			Examples: s.Examples, InputModes: s.InputModes, OutputModes: s.OutputModes})
	}
	return out
}

func skillsOut(ss []task.Skill) []cardSkill {
	out := make([]cardSkill, 0, len(ss))
	for _, s := range ss {
		tags := s.Tags
		if tags == nil {
			tags = []string{}
		}
		out = append(out, cardSkill{ID: s.ID, Name: s.Name, Description: s.Description, Tags: tags,
			Examples: s.Examples, InputModes: s.InputModes, OutputModes: s.OutputModes})
	}
	return out
}

func extsIn(es []cardExtension) []task.Extension {
	var out []task.Extension
	for _, e := range es {
		out = append(out, task.Extension(e))
	}
	return out
}

func extsOut(es []task.Extension) []cardExtension {
	var out []cardExtension
	for _, e := range es {
		out = append(out, cardExtension(e))
	}
	return out
}

func parseCard03(body []byte) (*task.AgentCard, error) {
	var c card03
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("A2A 0.3 agent card: %w", err)
	}
	out := &task.AgentCard{Name: c.Name, Description: c.Description, Version: c.Version,
		ProtocolVersion: c.ProtocolVersion, DocumentationURL: c.DocumentationURL, IconURL: c.IconURL,
		InputModes: c.DefaultInputModes, OutputModes: c.DefaultOutputModes, Skills: skillsIn(c.Skills),
		Security: c.Security}
	if c.Provider != nil {
		out.Provider = &task.Provider{Organization: c.Provider.Organization, URL: c.Provider.URL}
	}
	transport := c.PreferredTransport
	if transport == "" {
		transport = "JSONRPC"
	}
	out.Interfaces = append(out.Interfaces, task.Interface{URL: c.URL, Binding: transport, ProtocolVersion: c.ProtocolVersion})
	for _, a := range c.AdditionalIfaces {
		if a.URL == c.URL && a.Transport == transport {
			continue
		}
		out.Interfaces = append(out.Interfaces, task.Interface{URL: a.URL, Binding: a.Transport, ProtocolVersion: c.ProtocolVersion})
	}
	out.Capabilities = task.Capabilities{Streaming: c.Capabilities.Streaming, PushNotifications: c.Capabilities.PushNotifications,
		ExtendedCard: c.SupportsExtended, Extensions: extsIn(c.Capabilities.Extensions)}
	for _, name := range sortedKeys(c.SecuritySchemes) {
		s := c.SecuritySchemes[name]
		kind, ok := schemeKind03[s.Type]
		if !ok {
			return nil, fmt.Errorf("A2A 0.3 agent card: security scheme %q has unknown type %q", name, s.Type)
		}
		out.SecuritySchemes = append(out.SecuritySchemes, task.SecurityScheme{Name: name, Kind: kind,
			Description: s.Description, HTTPScheme: s.Scheme, BearerFormat: s.BearerFormat, In: s.In,
			ParamName: s.Name, OpenIDConnectURL: s.OpenIDConnectURL, Flows: s.Flows})
	}
	return out, nil
}

func parseCard10(body []byte) (*task.AgentCard, error) {
	var c card10
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("A2A 1.0 agent card: %w", err)
	}
	out := &task.AgentCard{Name: c.Name, Description: c.Description, Version: c.Version,
		DocumentationURL: c.DocumentationURL, IconURL: c.IconURL,
		InputModes: c.DefaultInputModes, OutputModes: c.DefaultOutputModes, Skills: skillsIn(c.Skills)}
	if c.Provider != nil {
		out.Provider = &task.Provider{Organization: c.Provider.Organization, URL: c.Provider.URL}
	}
	for _, i := range c.SupportedInterfaces {
		out.Interfaces = append(out.Interfaces, task.Interface{URL: i.URL, Binding: i.ProtocolBinding,
			ProtocolVersion: i.ProtocolVersion, Tenant: i.Tenant})
	}
	if len(out.Interfaces) > 0 {
		out.ProtocolVersion = out.Interfaces[0].ProtocolVersion
	}
	out.Capabilities = task.Capabilities{Streaming: c.Capabilities.Streaming, PushNotifications: c.Capabilities.PushNotifications,
		ExtendedCard: c.Capabilities.ExtendedAgentCard, Extensions: extsIn(c.Capabilities.Extensions)}
	for _, name := range sortedKeys(c.SecuritySchemes) {
		s := c.SecuritySchemes[name]
		ss := task.SecurityScheme{Name: name}
		switch {
		case s.APIKey != nil:
			ss.Kind, ss.Description, ss.In, ss.ParamName = task.SchemeAPIKey, s.APIKey.Description, s.APIKey.Location, s.APIKey.Name
		case s.HTTP != nil:
			ss.Kind, ss.Description, ss.HTTPScheme, ss.BearerFormat = task.SchemeHTTP, s.HTTP.Description, s.HTTP.Scheme, s.HTTP.BearerFormat
		case s.OAuth2 != nil:
			ss.Kind, ss.Description, ss.Flows = task.SchemeOAuth2, s.OAuth2.Description, s.OAuth2.Flows
		case s.OIDC != nil:
			ss.Kind, ss.Description, ss.OpenIDConnectURL = task.SchemeOIDC, s.OIDC.Description, s.OIDC.OpenIDConnectURL
		case s.MTLS != nil:
			ss.Kind, ss.Description = task.SchemeMTLS, s.MTLS.Description
		default:
			return nil, fmt.Errorf("A2A 1.0 agent card: security scheme %q names no known scheme", name)
		}
		out.SecuritySchemes = append(out.SecuritySchemes, ss)
	}
	for _, r := range c.SecurityReqs {
		req := map[string][]string{}
		for name, l := range r.Schemes {
			req[name] = l.List
		}
		out.Security = append(out.Security, req)
	}
	return out, nil
}

// RenderCard renders a card in the given version's shape.
func RenderCard(c *task.AgentCard, version string) ([]byte, error) {
	if version == V10 {
		return json.Marshal(card10Of(c))
	}
	return json.Marshal(card03Of(c))
}

// bindingOf is an interface's protocol binding; an interface that names none
// (writ's own description of an agent whose card is unavailable) is JSON-RPC,
// A2A's default.
func bindingOf(f task.Interface) string {
	if f.Binding == "" {
		return "JSONRPC"
	}
	return f.Binding
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func card03Of(c *task.AgentCard) card03 {
	out := card03{ProtocolVersion: "0.3.0", Name: c.Name, Description: c.Description, Version: c.Version,
		DocumentationURL: c.DocumentationURL, IconURL: c.IconURL, DefaultInputModes: nonNil(c.InputModes),
		DefaultOutputModes: nonNil(c.OutputModes), Skills: skillsOut(c.Skills), Security: c.Security,
		SupportsExtended: c.Capabilities.ExtendedCard}
	if c.Provider != nil {
		out.Provider = &cardProvider{Organization: c.Provider.Organization, URL: c.Provider.URL}
	}
	for i, f := range c.Interfaces {
		f.Binding = bindingOf(f)
		if i == 0 {
			out.URL, out.PreferredTransport = f.URL, f.Binding
		}
		out.AdditionalIfaces = append(out.AdditionalIfaces, struct {
			URL       string `json:"url"`
			Transport string `json:"transport"`
		}{f.URL, f.Binding})
	}
	out.Capabilities.Streaming = c.Capabilities.Streaming
	out.Capabilities.PushNotifications = c.Capabilities.PushNotifications
	out.Capabilities.Extensions = extsOut(c.Capabilities.Extensions)
	if len(c.SecuritySchemes) > 0 {
		out.SecuritySchemes = map[string]scheme03{}
	}
	for _, s := range c.SecuritySchemes {
		typ := ""
		for k, v := range schemeKind03 {
			if v == s.Kind {
				typ = k
			}
		}
		out.SecuritySchemes[s.Name] = scheme03{Type: typ, Description: s.Description, Scheme: s.HTTPScheme,
			BearerFormat: s.BearerFormat, In: s.In, Name: s.ParamName, OpenIDConnectURL: s.OpenIDConnectURL, Flows: s.Flows}
	}
	return out
}

func card10Of(c *task.AgentCard) card10 {
	out := card10{Name: c.Name, Description: c.Description, Version: c.Version, DocumentationURL: c.DocumentationURL,
		IconURL: c.IconURL, DefaultInputModes: nonNil(c.InputModes), DefaultOutputModes: nonNil(c.OutputModes),
		Skills: skillsOut(c.Skills), SupportedInterfaces: []iface10{}}
	if c.Provider != nil {
		out.Provider = &cardProvider{Organization: c.Provider.Organization, URL: c.Provider.URL}
	}
	for _, f := range c.Interfaces {
		f.Binding = bindingOf(f)
		pv := f.ProtocolVersion
		if pv == "" {
			pv = V10
		}
		out.SupportedInterfaces = append(out.SupportedInterfaces, iface10{URL: f.URL, ProtocolBinding: f.Binding, Tenant: f.Tenant, ProtocolVersion: pv})
	}
	out.Capabilities = caps10{Streaming: c.Capabilities.Streaming, PushNotifications: c.Capabilities.PushNotifications,
		ExtendedAgentCard: c.Capabilities.ExtendedCard, Extensions: extsOut(c.Capabilities.Extensions)}
	if len(c.SecuritySchemes) > 0 {
		out.SecuritySchemes = map[string]scheme10{}
	}
	for _, s := range c.SecuritySchemes {
		var w scheme10
		switch s.Kind {
		case task.SchemeAPIKey:
			w.APIKey = &struct {
				Description string `json:"description,omitempty"`
				Location    string `json:"location"`
				Name        string `json:"name"`
			}{s.Description, s.In, s.ParamName}
		case task.SchemeHTTP:
			w.HTTP = &struct {
				Description  string `json:"description,omitempty"`
				Scheme       string `json:"scheme"`
				BearerFormat string `json:"bearerFormat,omitempty"`
			}{s.Description, s.HTTPScheme, s.BearerFormat}
		case task.SchemeOAuth2:
			w.OAuth2 = &struct {
				Description       string         `json:"description,omitempty"`
				Flows             map[string]any `json:"flows,omitempty"`
				OAuth2MetadataURL string         `json:"oauth2MetadataUrl,omitempty"`
			}{Description: s.Description, Flows: s.Flows}
		case task.SchemeOIDC:
			w.OIDC = &struct {
				Description      string `json:"description,omitempty"`
				OpenIDConnectURL string `json:"openIdConnectUrl"`
			}{s.Description, s.OpenIDConnectURL}
		case task.SchemeMTLS:
			w.MTLS = &struct {
				Description string `json:"description,omitempty"`
			}{s.Description}
		}
		out.SecuritySchemes[s.Name] = w
	}
	for _, r := range c.Security {
		req := securityReq10{Schemes: map[string]struct {
			List []string `json:"list"`
		}{}}
		for name, scopes := range r {
			req.Schemes[name] = struct {
				List []string `json:"list"`
			}{nonNil(scopes)}
		}
		out.SecurityReqs = append(out.SecurityReqs, req)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
