package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/writ-authz/writ/task"
)

// manifest is the spec's AgentManifest, with the Metadata members writ maps.
type manifest struct {
	Name               string            `json:"name"`
	Description        string            `json:"description"`
	InputContentTypes  []string          `json:"input_content_types"`
	OutputContentTypes []string          `json:"output_content_types"`
	Metadata           *manifestMetadata `json:"metadata,omitempty"`
}

type manifestMetadata struct {
	Capabilities []capability `json:"capabilities,omitempty"`
	Domains      []string     `json:"domains,omitempty"`
	Tags         []string     `json:"tags,omitempty"`
	Author       *person      `json:"author,omitempty"`
	Links        []link       `json:"links,omitempty"`
}

type capability struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

type person struct {
	Name  string `json:"name"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

type link struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// ParseManifest parses an ACP AgentManifest into the kernel's agent card:
//
//   - name, description → Name, Description
//   - input_content_types, output_content_types → InputModes, OutputModes
//   - metadata.capabilities[{name, description}] → one skill each (ID and Name are
//     the capability name); without capabilities, tags or domains make one skill
//     named after the agent, so tag-based discovery still works
//   - metadata.tags + metadata.domains → every skill's Tags (ACP tags the agent,
//     not its capabilities)
//   - metadata.author {name, url} → Provider; the documentation link → DocumentationURL
//   - Capabilities.Streaming is true: every ACP agent accepts mode "stream"; ACP has
//     no push notifications and no extended manifest.
//
// Dropped, as the card has no place for them: metadata.annotations,
// documentation (markdown text), license, programming_language,
// natural_languages, framework, created_at, updated_at, author.email,
// contributors, links other than documentation, dependencies,
// recommended_models, and status (run metrics).
func ParseManifest(body []byte) (*task.AgentCard, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, fmt.Errorf("not an ACP agent manifest: a JSON object is required")
	}
	var m manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("not an ACP agent manifest: %w", err)
	}
	if m.Name == "" {
		return nil, fmt.Errorf("not an ACP agent manifest: name is missing")
	}
	c := &task.AgentCard{Name: m.Name, Description: m.Description,
		InputModes: m.InputContentTypes, OutputModes: m.OutputContentTypes,
		Capabilities: task.Capabilities{Streaming: true}}
	md := m.Metadata
	if md == nil {
		return c, nil
	}
	tags := append(append([]string(nil), md.Tags...), md.Domains...)
	for _, cp := range md.Capabilities {
		if cp.Name == "" {
			continue
		}
		c.Skills = append(c.Skills, task.Skill{ID: cp.Name, Name: cp.Name, Description: cp.Description, Tags: slices.Clone(tags)})
	}
	if len(c.Skills) == 0 && len(tags) > 0 {
		c.Skills = []task.Skill{{ID: m.Name, Name: m.Name, Description: m.Description, Tags: tags}}
	}
	if a := md.Author; a != nil && (a.Name != "" || a.URL != "") {
		c.Provider = &task.Provider{Organization: a.Name, URL: a.URL}
	}
	for _, l := range md.Links {
		if l.Type == "documentation" && c.DocumentationURL == "" {
			c.DocumentationURL = l.URL
		}
	}
	return c, nil
}

// RenderManifest renders a kernel agent card as an ACP AgentManifest: skills
// become metadata.capabilities (name: the skill's name, else its id), the union
// of the skills' tags becomes metadata.tags (ACP domains, folded into tags on
// parsing, come back as tags), Provider becomes metadata.author and
// DocumentationURL a documentation link. The content types default to "*/*", as
// the spec requires at least one. Lost: the version, interfaces, capabilities,
// security schemes, icon, skill ids that differ from their names, examples and
// per-skill modes (ACP manifests carry none of these).
func RenderManifest(c *task.AgentCard) ([]byte, error) {
	if c == nil || c.Name == "" {
		return nil, fmt.Errorf("an agent manifest needs a name")
	}
	m := manifest{Name: c.Name, Description: c.Description,
		InputContentTypes: c.InputModes, OutputContentTypes: c.OutputModes}
	if len(m.InputContentTypes) == 0 {
		m.InputContentTypes = []string{"*/*"}
	}
	if len(m.OutputContentTypes) == 0 {
		m.OutputContentTypes = []string{"*/*"}
	}
	md := &manifestMetadata{}
	seen := map[string]bool{}
	for _, s := range c.Skills {
		name := s.Name
		if name == "" {
			name = s.ID
		}
		// A skill named after the agent is the one ParseManifest made from bare tags.
		if name != c.Name {
			md.Capabilities = append(md.Capabilities, capability{Name: name, Description: s.Description})
		}
		for _, t := range s.Tags {
			if !seen[t] {
				seen[t] = true
				md.Tags = append(md.Tags, t)
			}
		}
	}
	if p := c.Provider; p != nil && p.Organization != "" {
		md.Author = &person{Name: p.Organization, URL: p.URL}
	}
	if c.DocumentationURL != "" {
		md.Links = []link{{Type: "documentation", URL: c.DocumentationURL}}
	}
	if len(md.Capabilities) > 0 || len(md.Tags) > 0 || md.Author != nil || len(md.Links) > 0 {
		m.Metadata = md
	}
	return json.Marshal(m)
}
