package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/task"
)

// maxLine bounds a line read (as writ report bounds it): a longer one is
// skipped, never held.
const maxLine = 16 << 20

// rawLine is what a replay reads of a decision log line, in either format:
// writ's (type "decision", the policy input in input) or OPA's (path
// decisionlog.OPAPath, the result in result, the policy input in custom).
type rawLine struct {
	Type       string `json:"type"`
	Path       string `json:"path"`
	DecisionID string `json:"decision_id"`
	// writ's format.
	Route   string                  `json:"route"`
	Target  string                  `json:"target"`
	Caller  *decisionlog.LineCaller `json:"caller"`
	Allow   bool                    `json:"allow"`
	DryRun  bool                    `json:"dry_run"`
	Denials []task.Denial           `json:"denials"`
	// Revision is the policy revision that decided (policy_revision; OPA's
	// format: revision).
	PolicyRevision string `json:"policy_revision"`
	Revision       string `json:"revision"`
	inputFields
	// OPA's format: input is writ's summary of the decision there.
	Result *struct {
		Allow   bool          `json:"allow"`
		Denials []task.Denial `json:"denials"`
	} `json:"result"`
	Custom *struct {
		DryRun bool `json:"dry_run"`
		inputFields
	} `json:"custom"`
}

// inputFields are the policy input of a line (decision_log.include_input).
type inputFields struct {
	InputVersion string          `json:"input_version"`
	InputMasked  []string        `json:"input_masked"`
	Input        json.RawMessage `json:"input"`
}

// summary is writ's summary of a decision in OPA's input.
type summary struct {
	Route  string                  `json:"route"`
	Target string                  `json:"target"`
	Caller *decisionlog.LineCaller `json:"caller"`
}

// decision is one logged decision as a replay needs it.
type decision struct {
	id     string
	caller *decisionlog.LineCaller
	target string
	// allow and codes are the logged policy decision (in dry-run mode the
	// policy denied although the request passed).
	allow    bool
	codes    []string
	revision string
	// hasInput: the line carries a policy input, of version (the line's
	// input_version) and with the members masked out.
	hasInput bool
	version  string
	masked   []string
}

// kind says what a line is.
type kind int

const (
	notDecision kind = iota // another line of the log: lifecycle, push, custody
	isDecision
	notJSON
)

// writLine is a line as writ's format writes it, the policy input decoded
// with the rest of the line in one pass (the fast path: a replay is mostly
// JSON decoding).
type writLine struct {
	Type           string                  `json:"type"`
	DecisionID     string                  `json:"decision_id"`
	Route          string                  `json:"route"`
	Target         string                  `json:"target"`
	Caller         *decisionlog.LineCaller `json:"caller"`
	Allow          bool                    `json:"allow"`
	DryRun         bool                    `json:"dry_run"`
	Denials        []task.Denial           `json:"denials"`
	PolicyRevision string                  `json:"policy_revision"`
	InputVersion   string                  `json:"input_version"`
	InputMasked    []string                `json:"input_masked"`
	Input          *authz.Input            `json:"input"`
}

// writPrefix starts every line writ's format writes (OPA's starts with its
// decision_id).
var writPrefix = []byte(`{"time":`)

// parse reads one line: a decision, with its policy input decoded when the
// line carries one of this version (in, nil otherwise). A line of writ's
// format is decoded in one pass; any other (OPA's format, whose input is in
// custom, or a line the fast path cannot decode: an input of another
// version) by the general path, which tells what it is.
func parse(b []byte) (*decision, *authz.Input, kind) {
	if bytes.HasPrefix(b, writPrefix) {
		var w writLine
		if err := json.Unmarshal(b, &w); err == nil {
			if w.Type != decisionlog.TypeDecision {
				return nil, nil, notDecision
			}
			d := &decision{id: w.DecisionID, caller: w.Caller, target: w.Route, allow: w.Allow && !w.DryRun,
				codes: codesOf(w.Denials), revision: w.PolicyRevision,
				hasInput: w.Input != nil, version: w.InputVersion, masked: w.InputMasked}
			if w.Target != "" {
				d.target = w.Target
			}
			if w.InputVersion != authz.InputVersion {
				return d, nil, isDecision
			}
			return d, w.Input, isDecision
		}
	}
	d, raw, k := parseGeneral(b)
	if k != isDecision || len(raw) == 0 || d.version != authz.InputVersion {
		return d, nil, k
	}
	var in authz.Input
	if err := json.Unmarshal(raw, &in); err != nil {
		return d, nil, k
	}
	return d, &in, k
}

// parseGeneral reads one line of either format, and the policy input's
// JSON when it carries one. A decision line in OPA's format keeps its input
// in custom.
func parseGeneral(b []byte) (*decision, json.RawMessage, kind) {
	var r rawLine
	if err := json.Unmarshal(b, &r); err != nil || b[0] != '{' {
		return nil, nil, notJSON
	}
	switch {
	case r.Type == decisionlog.TypeDecision:
		d := &decision{id: r.DecisionID, caller: r.Caller, target: r.Route, allow: r.Allow && !r.DryRun,
			codes: codesOf(r.Denials), revision: r.PolicyRevision}
		if r.Target != "" {
			d.target = r.Target // egress: the agent called
		}
		return d, d.inputOf(&r.inputFields), isDecision
	case r.Type == "" && r.Path == decisionlog.OPAPath && r.Result != nil:
		d := &decision{id: r.DecisionID, allow: r.Result.Allow, codes: codesOf(r.Result.Denials), revision: r.Revision}
		var s summary
		if len(r.Input) > 0 && json.Unmarshal(r.Input, &s) == nil {
			d.caller, d.target = s.Caller, s.Route
			if s.Target != "" {
				d.target = s.Target
			}
		}
		var raw json.RawMessage
		if c := r.Custom; c != nil {
			d.allow = d.allow && !c.DryRun
			raw = d.inputOf(&c.inputFields)
		}
		return d, raw, isDecision
	}
	return nil, nil, notDecision
}

// inputOf records what f says of the line's input, and returns its JSON.
func (d *decision) inputOf(f *inputFields) json.RawMessage {
	d.hasInput, d.version, d.masked = len(f.Input) > 0, f.InputVersion, f.InputMasked
	return f.Input
}

func codesOf(ds []task.Denial) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Code)
	}
	return out
}

// errTooLong: a line longer than maxLine, skipped.
var errTooLong = errors.New("line too long")

// readLine reads one line without its newline into buf (reused): a line
// longer than maxLine is read through and dropped (errTooLong), so memory
// stays bounded whatever the log holds. io.EOF ends the log.
func readLine(r *bufio.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	long := false
	for {
		frag, err := r.ReadSlice('\n')
		if !long {
			if len(buf)+len(frag) > maxLine {
				long, buf = true, buf[:0]
			} else {
				buf = append(buf, frag...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && !errors.Is(err, io.EOF):
			return nil, err
		case long:
			return buf, errTooLong
		case errors.Is(err, io.EOF) && len(buf) == 0:
			return nil, io.EOF
		}
		return bytes.TrimRight(buf, "\r\n"), nil
	}
}
