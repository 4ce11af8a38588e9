package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"regexp"
	"strings"

	"github.com/writ-authz/writ/task"
)

func invalid(format string, args ...any) *task.Fault {
	return task.NewFault(task.KindInvalidParams, fmt.Sprintf(format, args...))
}

// obj is one JSON object with its members still undecoded. ACP members are looked
// up by their exact names: encoding/json matches struct fields case-insensitively,
// so a body like {"agent_name":"a","AGENT_NAME":"b"} would name agent "b" to writ
// and agent "a" to the upstream. With exact lookup writ and a Python upstream agree
// (both take the last of duplicate keys).
type obj map[string]json.RawMessage

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// object decodes raw as a JSON object; where names it in errors.
func object(raw json.RawMessage, where string) (obj, *task.Fault) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalid("%s must be an object", where)
	}
	var o obj
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, invalid("%s: %s", where, err.Error())
	}
	return o, nil
}

// str returns the string member key. Absent and null both report ok=false.
func (o obj) str(key, where string) (s string, ok bool, f *task.Fault) {
	raw, found := o[key]
	if !found || isNull(raw) {
		return "", false, nil
	}
	raw = bytes.TrimSpace(raw)
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false, invalid("%s.%s must be a string", where, key)
	}
	return s, true, nil
}

// array returns the array member key. Absent and null both report ok=false.
func (o obj) array(key, where string) ([]json.RawMessage, bool, *task.Fault) {
	raw, found := o[key]
	if !found || isNull(raw) {
		return nil, false, nil
	}
	raw = bytes.TrimSpace(raw)
	var a []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &a) != nil {
		return nil, false, invalid("%s.%s must be an array", where, key)
	}
	return a, true, nil
}

// member returns the object member key. Absent and null both report ok=false.
func (o obj) member(key, where string) (obj, bool, *task.Fault) {
	raw, found := o[key]
	if !found || isNull(raw) {
		return nil, false, nil
	}
	m, f := object(raw, where+"."+key)
	return m, f == nil, f
}

// anyMap returns the object member key as plain values (for metadata).
func (o obj) anyMap(key, where string) (map[string]any, *task.Fault) {
	raw, found := o[key]
	if !found || isNull(raw) {
		return nil, nil
	}
	raw = bytes.TrimSpace(raw)
	var m map[string]any
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, invalid("%s.%s must be an object", where, key)
	}
	return m, nil
}

// rolePattern is the Message.role pattern of the spec.
var rolePattern = regexp.MustCompile(`^(user|agent(/[a-zA-Z0-9_\-]+)?)$`)

// agentNamePattern accepts the spec's AgentName (an RFC 1123 label,
// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$, at most 63 characters) widened to upper case and
// underscores: the reference SDK does not enforce the pattern and names agents
// after Python functions ("await_external_approval").
var agentNamePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_\-]{0,61}[A-Za-z0-9])?$`)

func checkAgentName(name, where string) *task.Fault {
	if name == "" {
		return invalid("%s is required", where)
	}
	if !agentNamePattern.MatchString(name) {
		return invalid("%s %q is not an agent name (letters, digits, '-' and '_', at most 63)", where, name)
	}
	return nil
}

// isJSONType reports whether a media type (without parameters) is JSON.
func isJSONType(mt string) bool {
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// summary accumulates the shape of one or more caller messages.
type summary struct {
	s     task.MessageSummary
	metas []map[string]any
	seen  map[string]bool
}

// addMessage validates one ACP Message and adds its parts to the summary. The
// summary's role is the role of the last message added: earlier input messages
// are conversation context, the last one is the turn being sent.
func (sm *summary) addMessage(raw json.RawMessage, where string) *task.Fault {
	m, f := object(raw, where)
	if f != nil {
		return f
	}
	role, ok, f := m.str("role", where)
	if f != nil {
		return f
	}
	if !ok {
		return invalid("%s.role is required", where)
	}
	if !rolePattern.MatchString(role) {
		return invalid("%s.role %q is not a role (user, agent, agent/<name>)", where, role)
	}
	parts, _, f := m.array("parts", where)
	if f != nil {
		return f
	}
	if len(parts) == 0 {
		return invalid("%s.parts must hold at least one part", where)
	}
	for i, p := range parts {
		if f := sm.addPart(p, fmt.Sprintf("%s.parts[%d]", where, i)); f != nil {
			return f
		}
	}
	sm.s.Role, _, _ = strings.Cut(role, "/")
	return nil
}

// addPart validates one MessagePart and counts it: a part with content_url, or of
// a type that is neither text/* nor JSON, is a file; text/* is text; JSON is data.
func (sm *summary) addPart(raw json.RawMessage, where string) *task.Fault {
	p, f := object(raw, where)
	if f != nil {
		return f
	}
	ct, hasType, f := p.str("content_type", where)
	if f != nil {
		return f
	}
	if !hasType {
		ct = "text/plain" // the spec's default
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return invalid("%s.content_type %q is not a media type", where, ct)
	}
	_, hasContent, f := p.str("content", where)
	if f != nil {
		return f
	}
	uri, hasURL, f := p.str("content_url", where)
	if f != nil {
		return f
	}
	if hasContent && hasURL {
		return invalid("%s has both content and content_url; a part has at most one", where)
	}
	if enc, ok, f := p.str("content_encoding", where); f != nil {
		return f
	} else if ok && enc != "plain" && enc != "base64" {
		return invalid("%s.content_encoding %q is not plain or base64", where, enc)
	}
	if _, _, f := p.str("name", where); f != nil {
		return f
	}
	md, f := p.anyMap("metadata", where)
	if f != nil {
		return f
	}
	switch {
	case hasURL:
		if u, err := url.Parse(uri); err != nil || u.Scheme == "" {
			return invalid("%s.content_url %q is not an absolute URI", where, uri)
		}
		sm.s.Parts.File++
		sm.s.FileURIs = append(sm.s.FileURIs, uri)
	case strings.HasPrefix(mt, "text/"):
		sm.s.Parts.Text++
	case isJSONType(mt):
		sm.s.Parts.Data++
	default:
		sm.s.Parts.File++
	}
	if sm.seen == nil {
		sm.seen = map[string]bool{}
	}
	if !sm.seen[mt] {
		sm.seen[mt] = true
		sm.s.MediaTypes = append(sm.s.MediaTypes, mt)
	}
	if md != nil {
		sm.metas = append(sm.metas, md)
	}
	return nil
}
