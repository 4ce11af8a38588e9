package a2a

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

func invalid(format string, args ...any) *task.Fault {
	return task.NewFault(task.KindInvalidParams, fmt.Sprintf(format, args...))
}

// normRole maps every spelling of a role to "user" or "agent".
func normRole(r string) (string, bool) {
	switch r {
	case "user", "ROLE_USER":
		return "user", true
	case "agent", "ROLE_AGENT":
		return "agent", true
	}
	return "", false
}

// partKind is the kind of one part after validation, with its file URI and media type.
type partKind struct {
	kind      string // text, file, data
	uri       string
	mediaType string
}

// classifyPart validates a part for the dialect and says what kind it is.
func classifyPart(p *wirePart, d dialect, where string) (partKind, *task.Fault) {
	var present []string
	if p.Text != nil {
		present = append(present, "text")
	}
	if p.File != nil {
		present = append(present, "file")
	}
	if len(p.Data) > 0 && !bytes.Equal(p.Data, []byte("null")) {
		present = append(present, "data")
	}
	if p.Raw != nil {
		present = append(present, "raw")
	}
	if p.URL != nil {
		present = append(present, "url")
	}
	switch d {
	case v10:
		if p.File != nil {
			return partKind{}, invalid("%s: \"file\" is the A2A 0.3 part shape; 1.0 parts use \"url\" or \"raw\"", where)
		}
	default:
		if p.Raw != nil || p.URL != nil {
			return partKind{}, invalid("%s: \"raw\"/\"url\" are A2A 1.0 part fields, not 0.3", where)
		}
	}
	if len(present) == 0 {
		if d == v10 {
			return partKind{}, invalid("%s has no content: exactly one of text, raw, url, data is required", where)
		}
		return partKind{}, invalid("%s has no content: one of text, file, data is required", where)
	}
	if len(present) > 1 {
		return partKind{}, invalid("%s has two kinds at once (%s); a part is exactly one kind", where, strings.Join(present, " and "))
	}
	if p.Kind != nil && d != v10 {
		want := present[0]
		if *p.Kind != want {
			return partKind{}, invalid("%s: kind %q does not match its %q content", where, *p.Kind, want)
		}
	} else if p.Kind == nil && d == rpc03 {
		return partKind{}, invalid("%s: \"kind\" is required in A2A 0.3 parts", where)
	}
	out := partKind{mediaType: p.MediaType}
	switch present[0] {
	case "text":
		out.kind = "text"
	case "data":
		out.kind = "data"
	case "raw":
		out.kind = "file"
	case "url":
		out.kind = "file"
		out.uri = *p.URL
	case "file":
		out.kind = "file"
		f := p.File
		out.mediaType = f.MimeType
		switch {
		case f.URI != nil && f.Bytes != nil, f.FileWithURI != nil && f.FileWithBytes != nil:
			return partKind{}, invalid("%s: a file has either a uri or bytes, not both", where)
		case f.URI != nil:
			out.uri = *f.URI
		case f.FileWithURI != nil:
			out.uri = *f.FileWithURI
		case f.Bytes == nil && f.FileWithBytes == nil:
			return partKind{}, invalid("%s: a file needs a uri or bytes", where)
		}
	}
	if out.kind == "file" && out.uri != "" {
		if u, err := url.Parse(out.uri); err != nil || u.Scheme == "" {
			return partKind{}, invalid("%s: file uri %q is not an absolute URI", where, out.uri)
		}
	}
	return out, nil
}

// summarize validates a caller's message and reduces it to its shape.
func summarize(m *wireMessage, d dialect) (*task.MessageSummary, []map[string]any, *task.Fault) {
	if m.MessageID == "" {
		return nil, nil, invalid("message.messageId is required")
	}
	role, ok := normRole(m.Role)
	if !ok {
		if m.Role == "" {
			return nil, nil, invalid("message.role is required")
		}
		return nil, nil, invalid("message.role %q is not a role (user, agent)", m.Role)
	}
	parts := m.Parts
	if d == rest03 && len(parts) == 0 {
		parts = m.Content
	}
	if len(parts) == 0 {
		return nil, nil, invalid("message.parts must hold at least one part")
	}
	s := &task.MessageSummary{ID: m.MessageID, Role: role, Metadata: m.Metadata,
		Extensions: m.Extensions, References: m.ReferenceTaskIDs}
	metas := []map[string]any{m.Metadata}
	seenType := map[string]bool{}
	for i := range parts {
		pk, f := classifyPart(&parts[i], d, fmt.Sprintf("message.parts[%d]", i))
		if f != nil {
			return nil, nil, f
		}
		switch pk.kind {
		case "text":
			s.Parts.Text++
		case "file":
			s.Parts.File++
		case "data":
			s.Parts.Data++
		}
		if pk.uri != "" {
			s.FileURIs = append(s.FileURIs, pk.uri)
		}
		if pk.mediaType != "" && !seenType[pk.mediaType] {
			seenType[pk.mediaType] = true
			s.MediaTypes = append(s.MediaTypes, pk.mediaType)
		}
		metas = append(metas, parts[i].Metadata)
	}
	return s, metas, nil
}

// pushConfig validates a push config and converts it. taskFromPath, when set, is
// the task the config belongs to according to the path or the enclosing params.
func pushConfig(p *wirePush, d dialect, where string) (*task.PushConfig, *task.Fault) {
	if d != v10 && p.PushNotificationConfig != nil {
		p = p.PushNotificationConfig
	}
	if p.URL == "" {
		return nil, invalid("%s.url is required", where)
	}
	u, err := url.Parse(p.URL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		// Not quoted: a URL's userinfo, path or query may carry a credential.
		return nil, invalid("%s.url is not an absolute URL", where)
	}
	out := &task.PushConfig{ID: p.ID, URL: p.URL, Token: p.Token}
	if a := p.Authentication; a != nil {
		out.Credentials = a.Credentials
		switch {
		case d == v10:
			if len(a.Schemes) > 0 {
				return nil, invalid("%s.authentication.schemes is the A2A 0.3 shape; 1.0 uses \"scheme\"", where)
			}
			out.AuthScheme = a.Scheme
		case a.Scheme != "" && len(a.Schemes) == 0:
			out.AuthScheme = a.Scheme
		case len(a.Schemes) > 0:
			out.AuthScheme = a.Schemes[0]
		}
	}
	if f := pushHeaderValues(out, where); f != nil {
		return nil, f
	}
	return out, nil
}

// pushHeaderValues refuses a push config whose token, credentials or scheme
// writ could not write as the same header to every receiver
// (wire.HeaderValue): they go into the notification's headers
// (NotificationHeaders). The fault names the field, never its value.
func pushHeaderValues(p *task.PushConfig, where string) *task.Fault {
	switch {
	case p.Token != "" && !wire.HeaderValue(p.Token):
		return invalid("%s.token must be printable ASCII without leading or trailing spaces (it is sent as a header)", where)
	case p.Credentials != "" && !wire.HeaderValue(p.Credentials):
		return invalid("%s.authentication.credentials must be printable ASCII without leading or trailing spaces (it is sent as a header)", where)
	case p.AuthScheme != "" && !wire.HeaderToken(p.AuthScheme):
		return invalid("%s.authentication: the scheme is not an HTTP authentication scheme (a token)", where)
	}
	return nil
}
