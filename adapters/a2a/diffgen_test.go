package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"unicode/utf16"
)

// This file generates the requests of the parser-differential tests
// (differential_test.go against the real SDK servers, envelope_fuzz_test.go
// against in-process models of them): well-formed A2A requests of every
// operation, version and binding, and mutations of them that a parser could
// read differently from writ — case and Unicode-fold variants of keys,
// duplicates, escaped keys, proto-JSON (snake_case) aliases, odd keys,
// framing, nesting, key order, whitespace.
//
// Every base request names only "mine" ids; a mutation that smuggles a second
// reading names "victim" ones, so a differential shows as a server acting on
// a victim id (or another operation) where writ decided on "mine".

// jm is one member of a jobj: key is the exact text between the quotes (it may
// hold escapes or any bytes), val a jobj, a jraw (written verbatim) or
// anything json.Marshal takes.
type jm struct {
	key string
	val any
}

// jobj is a JSON object that keeps its member order and exact key text.
type jobj []jm

// jraw is JSON text written verbatim.
type jraw string

func (o jobj) clone() jobj {
	out := make(jobj, len(o))
	for i, m := range o {
		if sub, ok := m.val.(jobj); ok {
			m.val = sub.clone()
		}
		out[i] = m
	}
	return out
}

func (o jobj) index(key string) int {
	for i, m := range o {
		if m.key == key {
			return i
		}
	}
	return -1
}

func (o jobj) get(key string) any {
	if i := o.index(key); i >= 0 {
		return o[i].val
	}
	return nil
}

func (o jobj) obj(key string) jobj {
	sub, _ := o.get(key).(jobj)
	return sub
}

// set replaces the value of key in place, or appends key.
func (o jobj) set(key string, val any) jobj {
	if i := o.index(key); i >= 0 {
		out := o.clone()
		out[i].val = val
		return out
	}
	return append(o.clone(), jm{key, val})
}

func (o jobj) without(key string) jobj {
	out := jobj{}
	for _, m := range o.clone() {
		if m.key != key {
			out = append(out, m)
		}
	}
	return out
}

// insert puts a member at position pos (clamped; -1 appends).
func (o jobj) insert(pos int, key string, val any) jobj {
	out := o.clone()
	if pos < 0 || pos > len(out) {
		pos = len(out)
	}
	out = append(out[:pos], append(jobj{{key, val}}, out[pos:]...)...)
	return out
}

// rename changes the key text of key, keeping its value and position.
func (o jobj) rename(key, to string) jobj {
	out := o.clone()
	if i := out.index(key); i >= 0 {
		out[i].key = to
	}
	return out
}

// at applies f to the object at path (a chain of keys); the result is a copy.
func (o jobj) at(path []string, f func(jobj) jobj) jobj {
	if len(path) == 0 {
		return f(o.clone())
	}
	sub := o.obj(path[0])
	if sub == nil {
		return o.clone()
	}
	return o.set(path[0], sub.at(path[1:], f))
}

// style is how an object is written: the separators around keys and values.
type style struct{ afterKey, afterColon, afterComma, inner string }

var compact = style{}

func (o jobj) encode(s style) []byte {
	var b bytes.Buffer
	o.write(&b, s)
	return b.Bytes()
}

func (o jobj) write(b *bytes.Buffer, s style) {
	b.WriteByte('{')
	b.WriteString(s.inner)
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
			b.WriteString(s.afterComma)
		}
		b.WriteByte('"')
		b.WriteString(m.key)
		b.WriteByte('"')
		b.WriteString(s.afterKey)
		b.WriteByte(':')
		b.WriteString(s.afterColon)
		switch v := m.val.(type) {
		case jobj:
			v.write(b, s)
		case jraw:
			b.WriteString(string(v))
		default:
			raw, err := json.Marshal(v)
			if err != nil {
				panic(err)
			}
			b.Write(raw)
		}
	}
	b.WriteString(s.inner)
	b.WriteByte('}')
}

// victimize rewrites every "mine" value of o (ids, context ids, config ids,
// names, the push URL) to its "victim" twin.
func victimize(o jobj) jobj {
	out := o.clone()
	for i, m := range out {
		switch v := m.val.(type) {
		case jobj:
			out[i].val = victimize(v)
		case string:
			out[i].val = victimValue(v)
		}
	}
	return out
}

func victimValue(s string) string {
	s = strings.ReplaceAll(s, "mine", "victim")
	return strings.ReplaceAll(s, "hooks.example", "attacker.example")
}

// dcase is one request of the differential.
type dcase struct {
	family string
	name   string
	v10    bool
	rpc    bool // JSON-RPC (else HTTP+JSON)
	method string
	path   string
	header http.Header
	body   []byte
	// accept: writ must accept the request and every server must act on it as
	// writ decided (a harmless variant: proves writ does not just refuse).
	accept bool
}

func (c dcase) String() string { return c.family + "/" + c.name }

// base is a well-formed request: a JSON-RPC envelope, or an HTTP+JSON body.
type base struct {
	name   string
	v10    bool
	rpc    bool
	method string // HTTP method (HTTP+JSON)
	path   string // HTTP+JSON path
	body   jobj
	// params is where the operation's fields live: ["params"] for JSON-RPC,
	// [] for an HTTP+JSON body.
	params []string
}

func (b base) header() http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	if b.v10 {
		h.Set(VersionHeader, V10)
	}
	return h
}

func (b base) dcase(family, name string, body []byte) dcase {
	return dcase{family: family, name: b.name + "/" + name, v10: b.v10, rpc: b.rpc,
		method: b.method, path: b.path, header: b.header(), body: body}
}

func (b base) with(family, name string, body jobj) dcase {
	return b.dcase(family, name, body.encode(compact))
}

func (b base) accepted(family, name string, body jobj) dcase {
	c := b.with(family, name, body)
	c.accept = true
	return c
}

const (
	mineHook   = "https://hooks.example/cb"
	victimHook = "https://attacker.example/cb"
)

func msg03() jobj {
	return jobj{{"kind", "message"}, {"messageId", "m-1"}, {"role", "user"},
		{"parts", jraw(`[{"kind":"text","text":"screen Acme Trading FZE"}]`)},
		{"taskId", "mine"}, {"contextId", "ctx-mine"}}
}

func msg10() jobj {
	return jobj{{"messageId", "m-1"}, {"role", "ROLE_USER"},
		{"parts", jraw(`[{"text":"screen Acme Trading FZE"}]`)},
		{"taskId", "mine"}, {"contextId", "ctx-mine"}}
}

// msg03REST is the 0.3 proto-JSON message of the 0.3 HTTP+JSON binding.
func msg03REST() jobj {
	return jobj{{"messageId", "m-1"}, {"role", "ROLE_USER"},
		{"content", jraw(`[{"text":"screen Acme Trading FZE"}]`)},
		{"taskId", "mine"}, {"contextId", "ctx-mine"}}
}

func rpcBase(name string, v10 bool, method string, params jobj) base {
	return base{name: name, v10: v10, rpc: true, method: http.MethodPost, path: "/",
		body:   jobj{{"jsonrpc", "2.0"}, {"id", 1}, {"method", method}, {"params", params}},
		params: []string{"params"}}
}

func restBase(name string, v10 bool, method, path string, body jobj) base {
	return base{name: name, v10: v10, method: method, path: path, body: body, params: []string{}}
}

// bases are the well-formed requests the mutations start from: every A2A
// operation that carries a body, in each version and binding writ parses.
func bases() []base {
	push03 := jobj{{"id", "cfg-mine"}, {"url", mineHook}}
	return []base{
		rpcBase("v03-send", false, "message/send", jobj{{"message", msg03()}}),
		rpcBase("v03-send-push", false, "message/send", jobj{{"message", msg03()},
			{"configuration", jobj{{"blocking", true}, {"pushNotificationConfig", push03}}}}),
		rpcBase("v03-stream", false, "message/stream", jobj{{"message", msg03()}}),
		rpcBase("v03-get", false, "tasks/get", jobj{{"id", "mine"}}),
		rpcBase("v03-cancel", false, "tasks/cancel", jobj{{"id", "mine"}}),
		rpcBase("v03-resubscribe", false, "tasks/resubscribe", jobj{{"id", "mine"}}),
		rpcBase("v03-push-set", false, "tasks/pushNotificationConfig/set", jobj{{"taskId", "mine"}, {"pushNotificationConfig", push03}}),
		rpcBase("v03-push-get", false, "tasks/pushNotificationConfig/get", jobj{{"id", "mine"}, {"pushNotificationConfigId", "cfg-mine"}}),
		rpcBase("v03-push-list", false, "tasks/pushNotificationConfig/list", jobj{{"id", "mine"}}),
		rpcBase("v03-push-delete", false, "tasks/pushNotificationConfig/delete", jobj{{"id", "mine"}, {"pushNotificationConfigId", "cfg-mine"}}),

		rpcBase("v10-send", true, "SendMessage", jobj{{"message", msg10()}}),
		rpcBase("v10-send-push", true, "SendMessage", jobj{{"message", msg10()},
			{"configuration", jobj{{"taskPushNotificationConfig", jobj{{"id", "cfg-mine"}, {"url", mineHook}}}}}}),
		rpcBase("v10-stream", true, "SendStreamingMessage", jobj{{"message", msg10()}}),
		rpcBase("v10-get", true, "GetTask", jobj{{"id", "mine"}}),
		rpcBase("v10-cancel", true, "CancelTask", jobj{{"id", "mine"}}),
		rpcBase("v10-subscribe", true, "SubscribeToTask", jobj{{"id", "mine"}}),
		rpcBase("v10-list", true, "ListTasks", jobj{{"contextId", "ctx-mine"}}),
		rpcBase("v10-push-set", true, "CreateTaskPushNotificationConfig", jobj{{"taskId", "mine"}, {"id", "cfg-mine"}, {"url", mineHook}}),
		rpcBase("v10-push-get", true, "GetTaskPushNotificationConfig", jobj{{"taskId", "mine"}, {"id", "cfg-mine"}}),
		rpcBase("v10-push-list", true, "ListTaskPushNotificationConfigs", jobj{{"taskId", "mine"}}),
		rpcBase("v10-push-delete", true, "DeleteTaskPushNotificationConfig", jobj{{"taskId", "mine"}, {"id", "cfg-mine"}}),

		restBase("rest10-send", true, http.MethodPost, "/message:send", jobj{{"message", msg10()}}),
		restBase("rest10-send-push", true, http.MethodPost, "/message:send", jobj{{"message", msg10()},
			{"configuration", jobj{{"taskPushNotificationConfig", jobj{{"id", "cfg-mine"}, {"url", mineHook}}}}}}),
		restBase("rest10-stream", true, http.MethodPost, "/message:stream", jobj{{"message", msg10()}}),
		restBase("rest10-push-set", true, http.MethodPost, "/tasks/mine/pushNotificationConfigs", jobj{{"id", "cfg-mine"}, {"url", mineHook}}),
		restBase("rest03-send", false, http.MethodPost, "/v1/message:send", jobj{{"message", msg03REST()}}),
		restBase("rest03-send-push", false, http.MethodPost, "/v1/message:send", jobj{{"message", msg03REST()},
			{"configuration", jobj{{"pushNotification", push03}}}}),
		restBase("rest03-push-set", false, http.MethodPost, "/v1/tasks/mine/pushNotificationConfigs",
			jobj{{"name", "tasks/mine/pushNotificationConfigs/cfg-mine"}, {"pushNotificationConfig", push03}}),
	}
}

// foldVariants are spellings of name that encoding/json matches to a field
// called name (ASCII case and Unicode simple folding: ſ U+017F folds to s,
// K U+212A to k) and that a JSON.parse reader does not.
func foldVariants(name string) []string {
	seen := map[string]bool{name: true}
	var out []string
	add := func(v string) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	add(strings.ToUpper(name))
	add(strings.ToUpper(name[:1]) + name[1:])
	add(name[:len(name)-1] + strings.ToUpper(name[len(name)-1:]))
	add(strings.ReplaceAll(strings.ReplaceAll(name, "s", "ſ"), "S", "ſ"))
	add(strings.ReplaceAll(strings.ReplaceAll(name, "k", "\u212a"), "K", "\u212a"))
	if i := strings.IndexAny(name, "sS"); i >= 0 { // one ſ, the rest as is
		add(name[:i] + "ſ" + name[i+1:])
	}
	return out
}

// escapeKey writes every character of key as a \u escape (JSON text).
func escapeKey(key string) string {
	var b strings.Builder
	for _, r := range key {
		if r > 0xffff {
			for _, s := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, `\u%04x`, s)
			}
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// escapeFirst escapes only the first character of key.
func escapeFirst(key string) string {
	r := []rune(key)
	return fmt.Sprintf(`\u%04x`, r[0]) + string(r[1:])
}

// oddKeys are keys that look like key but are not it for any reader:
// whitespace, NUL, invalid UTF-8, a lone surrogate, zero-width, look-alike
// and combining characters, a dotless or dotted i (no simple fold maps them
// to i). Writ must ignore them as the servers do, or refuse.
func oddKeys(key string) map[string]string {
	return map[string]string{
		"leading-space": " " + key, "trailing-space": key + " ", "tab": key + `\t`,
		"nul-escaped": key + `\u0000`, "nbsp": key + "\u00a0", "zero-width": key + "\u200b",
		"invalid-utf8": key + "\xff", "lone-surrogate": `\ud800` + key,
		"fullwidth": string(rune(key[0])-'a'+'ａ') + key[1:],
		"dotless-i": strings.ReplaceAll(key, "i", "ı") + "\u0131", "dotted-I": "\u0130" + key,
		"bom-in-key": "\ufeff" + key, "combining": key + "\u0301",
	}
}

// altMethod is another method of the same version: what an attacker would
// rather have the agent run.
func altMethod(b base) string {
	m, _ := b.body.get("method").(string)
	switch {
	case b.v10 && m == "CancelTask":
		return "GetTask"
	case b.v10:
		return "CancelTask"
	case m == "tasks/cancel":
		return "tasks/get"
	}
	return "tasks/cancel"
}

// altValue is the value a smuggled duplicate of an envelope key carries.
func altValue(b base, key string) any {
	switch key {
	case "method":
		return altMethod(b)
	case "params":
		return victimize(b.body.obj("params"))
	case "id":
		return 99
	}
	return "2.0"
}

// paramKeys are the keys of the params (or REST body), and of the message
// inside them, that decide whose task a request acts on.
var paramKeys = []string{"id", "taskId", "contextId", "message", "configuration", "name",
	"pushNotificationConfigId", "pushNotificationConfig", "taskPushNotificationConfig",
	"pushNotification", "url"}

// protoAliases are the proto field names that proto-JSON readers (the JS SDK's
// decoders, protojson) accept in place of the JSON names.
var protoAliases = map[string]string{
	"taskId": "task_id", "contextId": "context_id", "messageId": "message_id",
	"pushNotificationConfigId":   "push_notification_config_id",
	"pushNotificationConfig":     "push_notification_config",
	"taskPushNotificationConfig": "task_push_notification_config",
	"historyLength":              "history_length",
	"acceptedOutputModes":        "accepted_output_modes",
	"returnImmediately":          "return_immediately",
	"referenceTaskIds":           "reference_task_ids",
}

// fieldObjects lists, for a base, every object path that holds decision
// fields: params (or the REST body), the message, the configuration and the
// push configs.
func fieldObjects(b base) [][]string {
	paths := [][]string{b.params}
	for _, sub := range [][]string{{"message"}, {"configuration"}, {"pushNotificationConfig"},
		{"configuration", "pushNotificationConfig"}, {"configuration", "taskPushNotificationConfig"},
		{"configuration", "pushNotification"}} {
		full := append(append([]string{}, b.params...), sub...)
		if objAt(b.body, full) != nil {
			paths = append(paths, full)
		}
	}
	return paths
}

func objAt(o jobj, path []string) jobj {
	for _, k := range path {
		o = o.obj(k)
		if o == nil {
			return nil
		}
	}
	return o
}

// systematicCases are every mutation family applied to every base where it
// applies.
func systematicCases() []dcase {
	// The request of issue 11: writ saw a get of the caller's task, a2a-go ran
	// a cancel of another tenant's.
	issue := baseNamed("v03-get")
	out := []dcase{issue.dcase("envelope-fold", "issue-11", []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get",`+
		`"params":{"id":"mine"},"Method":"tasks/cancel","Params":{"id":"victim"}}`))}
	for _, b := range bases() {
		out = append(out, b.accepted("baseline", "as-is", b.body))
		if b.rpc {
			out = append(out, envelopeCases(b)...)
		}
		out = append(out, framingCases(b)...)
		out = append(out, fieldCases(b)...)
		out = append(out, nestingCases(b)...)
		out = append(out, resourceNameCases(b)...)
	}
	return out
}

// baseNamed is the base called name.
func baseNamed(name string) base {
	for _, b := range bases() {
		if b.name == name {
			return b
		}
	}
	panic("no base " + name)
}

// envelopeCases mutate the JSON-RPC request object itself.
func envelopeCases(b base) []dcase {
	var out []dcase
	for _, key := range envelopeKeys {
		alt := altValue(b, key)
		pos := b.body.index(key)
		for _, v := range foldVariants(key) {
			out = append(out,
				b.with("envelope-fold", key+"/"+v+"/after", b.body.insert(-1, v, alt)),
				b.with("envelope-fold", key+"/"+v+"/before", b.body.insert(pos, v, alt)),
				b.with("envelope-fold", key+"/"+v+"/instead", b.body.rename(key, v)),
				b.with("envelope-fold", key+"/escaped-"+v+"/after", b.body.insert(-1, escapeKey(v), alt)))
		}
		out = append(out,
			b.with("envelope-dup", key+"/after", b.body.insert(-1, key, alt)),
			b.with("envelope-dup", key+"/before", b.body.insert(pos, key, alt)),
			b.with("envelope-dup", key+"/escaped-after", b.body.insert(-1, escapeKey(key), alt)),
			b.with("envelope-dup", key+"/escaped-first-before", b.body.insert(pos, escapeFirst(key), alt)),
			// An escaped exact key is the key itself for every JSON reader.
			b.accepted("envelope-escape", key+"/escaped", b.body.rename(key, escapeKey(key))),
			b.accepted("envelope-escape", key+"/escaped-first", b.body.rename(key, escapeFirst(key))),
		)
		// Keys that look like the key but are not it for any reader: whitespace,
		// NUL, invalid UTF-8, a lone surrogate, zero-width and look-alike
		// characters. Writ must ignore them as the servers do (or refuse).
		for name, odd := range oddKeys(key) {
			out = append(out, b.with("envelope-odd-key", key+"/"+name, b.body.insert(-1, odd, alt)))
		}
	}
	// Key order and whitespace do not change what a request means.
	perm := jobj{}
	for i := len(b.body) - 1; i >= 0; i-- {
		perm = append(perm, b.body[i])
	}
	out = append(out, b.accepted("key-order", "reversed", perm))
	out = append(out, b.accepted("key-order", "params-first", b.body.without("params").insert(0, "params", b.body.get("params"))))
	for name, s := range map[string]style{
		"spaces":   {afterKey: " ", afterColon: " ", afterComma: " ", inner: " "},
		"newlines": {afterKey: "\n", afterColon: "\r\n", afterComma: "\n\t", inner: "\n"},
	} {
		c := b.dcase("whitespace", name, b.body.encode(s))
		c.accept = true
		out = append(out, c)
	}
	// A second envelope: inside params it is data; the servers read the outer one.
	victim := jobj{{"jsonrpc", "2.0"}, {"id", 2}, {"method", altMethod(b)}, {"params", victimize(b.body.obj("params"))}}
	out = append(out,
		b.accepted("nested-envelope", "params.metadata", b.body.at([]string{"params"}, func(o jobj) jobj { return o.set("metadata", victim) })),
		b.accepted("nested-envelope", "params.params", b.body.at([]string{"params"}, func(o jobj) jobj {
			return o.set("method", altMethod(b)).set("params", victimize(b.body.obj("params")))
		})),
	)
	if objAt(b.body, []string{"params", "message"}) != nil {
		out = append(out, b.accepted("nested-envelope", "message.metadata", b.body.at([]string{"params", "message"}, func(o jobj) jobj {
			return o.set("metadata", victim)
		})))
		out = append(out, b.accepted("nested-envelope", "data-part", b.body.at([]string{"params", "message"}, func(o jobj) jobj {
			parts := `[{"kind":"data","data":` + string(victim.encode(compact)) + `}]`
			if b.v10 {
				parts = `[{"data":` + string(victim.encode(compact)) + `}]`
			}
			return o.set("parts", jraw(parts))
		})))
	}
	return out
}

// framingCases: what surrounds the one JSON object of a body.
func framingCases(b base) []dcase {
	body := b.body.encode(compact)
	victim := victimize(b.body).encode(compact)
	if b.rpc {
		victim = jobj{{"jsonrpc", "2.0"}, {"id", 2}, {"method", altMethod(b)}, {"params", victimize(b.body.obj("params"))}}.encode(compact)
	}
	var out []dcase
	for name, raw := range map[string][]byte{
		"second-object":      append(append([]byte{}, body...), victim...),
		"second-object-ws":   append(append(append([]byte{}, body...), '\n'), victim...),
		"trailing-garbage":   append(append([]byte{}, body...), " x"...),
		"trailing-comma":     append(append([]byte{}, body[:len(body)-1]...), ",}"...),
		"bom":                append([]byte("\xef\xbb\xbf"), body...),
		"array":              append(append([]byte("["), body...), ']'),
		"array-two":          append(append(append(append([]byte("["), body...), ','), victim...), ']'),
		"string":             []byte(`"` + string(bytes.ReplaceAll(body, []byte(`"`), []byte(`\"`))) + `"`),
		"number":             []byte("1"),
		"null":               []byte("null"),
		"empty":              {},
		"nul-after":          append(append([]byte{}, body...), 0),
		"truncated":          body[:len(body)-1],
		"comment":            append([]byte("/* */"), body...),
		"single-quoted-keys": bytes.ReplaceAll(body, []byte(`"method"`), []byte(`'method'`)),
	} {
		out = append(out, b.dcase("framing", name, raw))
	}
	ws := b.dcase("framing", "surrounding-whitespace", append(append([]byte(" \r\n\t"), body...), "\n \t"...))
	ws.accept = true
	out = append(out, ws)
	// A body the JS server decodes as UTF-16 (body-parser honours charset).
	u16 := b.dcase("framing", "utf16le-charset", utf16le(victim))
	u16.header.Set("Content-Type", "application/json; charset=utf-16le")
	out = append(out, u16)
	return out
}

func utf16le(b []byte) []byte {
	out := []byte{0xff, 0xfe}
	for _, u := range utf16.Encode([]rune(string(b))) {
		out = append(out, byte(u), byte(u>>8))
	}
	return out
}

// fieldCases mutate the decision fields inside params (or the REST body) and
// the objects below it.
func fieldCases(b base) []dcase {
	var out []dcase
	for _, path := range fieldObjects(b) {
		obj := objAt(b.body, path)
		where := strings.Join(path, ".")
		if where == "" {
			where = "body"
		}
		for _, key := range paramKeys {
			val := obj.get(key)
			if val == nil {
				continue
			}
			alt := victimAny(val)
			edit := func(f func(jobj) jobj) jobj { return b.body.at(path, f) }
			pos := obj.index(key)
			for _, v := range foldVariants(key) {
				out = append(out,
					b.with("field-fold", where+"."+key+"/"+v+"/after", edit(func(o jobj) jobj { return o.insert(-1, v, alt) })),
					b.with("field-fold", where+"."+key+"/"+v+"/before", edit(func(o jobj) jobj { return o.insert(pos, v, alt) })),
					b.with("field-fold", where+"."+key+"/"+v+"/instead", edit(func(o jobj) jobj { return o.rename(key, v).set(v, alt) })),
					b.with("field-fold", where+"."+key+"/escaped-"+v, edit(func(o jobj) jobj { return o.insert(-1, escapeKey(v), alt) })))
			}
			out = append(out,
				b.with("field-dup", where+"."+key+"/after", edit(func(o jobj) jobj { return o.insert(-1, key, alt) })),
				b.with("field-dup", where+"."+key+"/before", edit(func(o jobj) jobj { return o.insert(pos, key, alt) })),
				b.with("field-dup", where+"."+key+"/escaped", edit(func(o jobj) jobj { return o.insert(-1, escapeFirst(key), alt) })),
				b.accepted("field-escape", where+"."+key+"/escaped", edit(func(o jobj) jobj { return o.rename(key, escapeKey(key)) })),
			)
			for name, odd := range oddKeys(key) {
				out = append(out, b.with("field-odd-key", where+"."+key+"/"+name, edit(func(o jobj) jobj { return o.insert(-1, odd, alt) })))
			}
			if alias, ok := protoAliases[key]; ok {
				out = append(out,
					b.with("proto-alias", where+"."+alias+"/alongside", edit(func(o jobj) jobj { return o.insert(-1, alias, alt) })),
					b.with("proto-alias", where+"."+alias+"/instead", edit(func(o jobj) jobj { return o.rename(key, alias).set(alias, alt) })),
					b.with("proto-alias", where+"."+alias+"/json-name-null", edit(func(o jobj) jobj { return o.set(key, jraw("null")).insert(-1, alias, alt) })),
					b.with("proto-alias", where+"."+alias+"/folded", edit(func(o jobj) jobj { return o.insert(-1, strings.ToUpper(alias), alt) })),
				)
			}
			if s, ok := val.(string); ok {
				for name, raw := range map[string]string{
					"number": "12345", "array": `["` + victimValue(s) + `"]`, "true": "true",
					"object": `{"id":"` + victimValue(s) + `"}`, "null": "null",
				} {
					out = append(out, b.with("type-confusion", where+"."+key+"/"+name, edit(func(o jobj) jobj { return o.set(key, jraw(raw)) })))
				}
			}
		}
	}
	// The message's proto aliases where the base has no JSON name to shadow.
	if msg := objAt(b.body, append(append([]string{}, b.params...), "message")); msg != nil {
		mp := append(append([]string{}, b.params...), "message")
		for _, alias := range []string{"task_id", "context_id"} {
			out = append(out, b.with("proto-alias", "message-only-"+alias, b.body.at(mp, func(o jobj) jobj {
				return o.without("taskId").without("contextId").insert(-1, alias, "victim")
			})))
		}
	}
	return out
}

func victimAny(v any) any {
	switch v := v.(type) {
	case jobj:
		return victimize(v)
	case string:
		return victimValue(v)
	}
	return v
}

// resourceNameCases: the 0.3 HTTP+JSON push config carries its task (and
// config) in a resource name, "tasks/{id}/pushNotificationConfigs/{cid}",
// besides the path; a reader that believes the name must see the path's task.
func resourceNameCases(b base) []dcase {
	if b.body.get("name") == nil {
		return nil
	}
	var out []dcase
	for name, v := range map[string]string{
		"victim-task":      "tasks/victim/pushNotificationConfigs/cfg-mine",
		"victim-task-only": "tasks/victim",
		"victim-config":    "tasks/mine/pushNotificationConfigs/cfg-victim",
		"trailing":         "tasks/mine/",
		"prefix":           "tasks/mine-not",
		"nested":           "tasks/victim/tasks/mine/pushNotificationConfigs/cfg-mine",
		"no-prefix":        "mine",
		"empty":            "",
	} {
		out = append(out, b.with("resource-name", name, b.body.set("name", v)))
	}
	out = append(out, b.accepted("resource-name", "task-only", b.body.set("name", "tasks/mine")))
	return out
}

// nestingCases put a second reading where only data lives.
func nestingCases(b base) []dcase {
	if b.rpc {
		return nil
	}
	victim := victimize(b.body)
	return []dcase{
		b.accepted("nested-envelope", "body.metadata", b.body.set("metadata", victim)),
		b.accepted("nested-envelope", "body.metadata-envelope", b.body.set("metadata",
			jobj{{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tasks/cancel"}, {"params", victim}})),
	}
}

// randomCases combine two or three mutations of the systematic families on
// random bases, with random member order and whitespace.
func randomCases(rng *rand.Rand, n int) []dcase {
	all := bases()
	var out []dcase
	for i := 0; i < n; i++ {
		b := all[rng.IntN(len(all))]
		body := b.body.clone()
		var steps []string
		for k := 0; k < 2+rng.IntN(2); k++ {
			var step string
			body, step = randomStep(rng, b, body)
			steps = append(steps, step)
		}
		s := compact
		if rng.IntN(2) == 0 {
			s = style{afterKey: " ", afterColon: "\n", afterComma: "\t", inner: " "}
		}
		out = append(out, b.dcase("random", fmt.Sprintf("%d:%s", i, strings.Join(steps, "+")), body.encode(s)))
	}
	return out
}

func randomStep(rng *rand.Rand, b base, body jobj) (jobj, string) {
	paths := fieldObjects(b)
	if b.rpc {
		paths = append(paths, []string{})
	}
	path := paths[rng.IntN(len(paths))]
	obj := objAt(body, path)
	if len(obj) == 0 {
		return body, "noop"
	}
	m := obj[rng.IntN(len(obj))]
	key := m.key
	alt := victimAny(m.val)
	if len(path) == 0 && b.rpc {
		alt = altValue(b, key)
	}
	var newKey, what string
	switch rng.IntN(6) {
	case 0:
		vs := foldVariants(key)
		if len(vs) == 0 {
			return body, "noop"
		}
		newKey, what = vs[rng.IntN(len(vs))], "fold"
	case 1:
		newKey, what = key, "dup"
	case 2:
		newKey, what = escapeKey(key), "escaped-dup"
	case 3:
		alias, ok := protoAliases[key]
		if !ok {
			return body, "noop"
		}
		newKey, what = alias, "alias"
	case 4: // shuffle the object's members
		return body.at(path, func(o jobj) jobj {
			rng.Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
			return o
		}), "shuffle:" + strings.Join(path, ".")
	default:
		return body.at(path, func(o jobj) jobj { return o.rename(key, escapeKey(key)) }), "escape:" + key
	}
	pos := -1
	if rng.IntN(2) == 0 {
		pos = rng.IntN(len(obj) + 1)
	}
	return body.at(path, func(o jobj) jobj { return o.insert(pos, newKey, alt) }), what + ":" + strings.Join(append(path, newKey), ".")
}
