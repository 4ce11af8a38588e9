package authz

import (
	"strings"

	"github.com/writ-authz/writ/authz/inputpaths"
)

// InputLog is how decisions carry their policy input to the decision log
// (decision_log.include_input), so that a log is a corpus a proposed policy
// can be replayed on (writ policy replay). What it records is the input the
// policy saw, redacted as the rest of the log is: the input holds no message
// content but the counts of its parts and its file URIs, which are recorded
// as their origins (a presigned URL carries its credential in its query);
// no token or credential (the caller is what identity verified: its claims,
// never the token; a push callback is its origin and has_token); and
// without the members the configured masks name. Safe for concurrent use.
type InputLog struct {
	masks  mask
	masked []string
}

// NewInputLog records inputs without the members paths name: each is
// inputpaths.Prefix and a member path ("input.caller.user_id"), a list's
// member masking it in every element, a path below the caller's claims one
// claim ("input.caller.claims.email"); inputpaths.CheckMask refuses the
// others (the version among them: a replay reads the input by it).
func NewInputLog(paths []string) (*InputLog, error) {
	l := &InputLog{masks: mask{}}
	for _, p := range paths {
		if err := inputpaths.CheckMask(p); err != nil {
			return nil, err
		}
		l.masks.add(strings.Split(strings.TrimPrefix(p, inputpaths.Prefix), "."))
		l.masked = append(l.masked, p)
	}
	if len(l.masks) == 0 {
		l.masks = nil
	}
	return l, nil
}

// Masked are the paths masked out, as configured.
func (l *InputLog) Masked() []string { return l.masked }

// Of is in as a decision event carries it (events.Input). The event is
// written after the request has moved on: in must not change once decided,
// as the core never changes it.
func (l *InputLog) Of(in *Input) LoggedInput { return LoggedInput{in: in, log: l} }

// LoggedInput is one decision's input as the decision log records it.
type LoggedInput struct {
	in  *Input
	log *InputLog
}

// AppendJSON appends the input as one JSON object: redacted, masked.
func (x LoggedInput) AppendJSON(b []byte) []byte {
	e := jsonEnc{b: b}
	encodeInput(&e, redacted(x.in), x.log.masks)
	return e.b
}

// Version is the input document's version.
func (x LoggedInput) Version() string {
	if x.in.Version == "" {
		return InputVersion
	}
	return x.in.Version
}

// Masked are the paths masked out of the record.
func (x LoggedInput) Masked() []string { return x.log.masked }

// redacted is in as the log may hold it: its file URIs cut to their origins
// (scheme://host[:port]), as a push callback's URL is. in itself when it has
// none; a copy otherwise (in is shared with the request).
func redacted(in *Input) *Input {
	if len(in.Task.FileURIs) == 0 {
		return in
	}
	c := *in
	c.Task.FileURIs = make([]string, len(in.Task.FileURIs))
	for i, u := range in.Task.FileURIs {
		c.Task.FileURIs[i], _, _, _ = splitURL(u)
	}
	return &c
}
