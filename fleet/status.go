package fleet

import (
	"encoding/json"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/bundle"
)

// PolicySet is what the status says of one of writ's policy sets. It is
// reported as a bundle of OPA's status, named Name ("writ" the live set,
// "writ-shadow" the shadow), whether its files are local or a bundle's:
// a fleet dashboard reads every instance's active revision in one place.
type PolicySet struct {
	Name string
	// Revision is writ's policy revision (a content digest, with
	// "@<bundle revision>" for a bundle's set).
	Revision string
	// Activated is when the revision began serving.
	Activated time.Time
	// Source says where the set comes from (its files, the bundle URL).
	Source string
	// Error is why the last reload was refused ("" when it passed), at
	// ErrorAt: the set keeps serving Revision.
	Error   string
	ErrorAt time.Time
}

// UpdatePolicies reports writ's policy sets; the status plugin uploads
// the change (with status:).
func (p *Plugins) UpdatePolicies(sets []PolicySet) {
	m := make(map[string]*bundle.Status, len(sets))
	for _, s := range sets {
		st := &bundle.Status{Name: s.Name, ActiveRevision: s.Revision, LastSuccessfulActivation: s.Activated.UTC(),
			Type: "snapshot", Message: s.Source}
		if s.Error != "" {
			// OPA's codes: bundle_error is an activation that failed.
			st.Code, st.Message, st.LastRequest = "bundle_error", s.Error, s.ErrorAt.UTC()
		}
		m[s.Name] = st
	}
	p.status.BulkUpdateBundleStatus(m)
}

// Part states (OPA's plugin states).
const (
	PartOK       = string(plugins.StateOK)
	PartNotReady = string(plugins.StateNotReady)
	PartError    = string(plugins.StateErr)
	PartWarn     = string(plugins.StateWarn)
)

// UpdatePart reports one of writ's own parts (the store, identity, push,
// a door) as a plugin of OPA's status, named "writ_<name>".
func (p *Plugins) UpdatePart(name, state, message string) {
	p.mgr.UpdatePluginStatus("writ_"+name, &plugins.Status{State: plugins.State(state), Message: message})
}

// Status is the status document, in OPA's shape (the status plugin's
// UpdateRequestV1: labels, bundles, decision_logs, plugins, metrics), as
// it is uploaded. Only after Start.
func (p *Plugins) Status() ([]byte, error) {
	return json.Marshal(p.status.Snapshot())
}
