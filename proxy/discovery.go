package proxy

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/task"
)

// The directory's two shapes are the two adapters' card renderings: A2A cards at
// DirectoryPath, ACP manifests at ACPDirectoryPath.
var (
	cardListing, _ = adapters.Select("a2a", DirectoryPath)
	acpListing, _  = adapters.Select("acp", ACPDirectoryPath)
)

type directoryShape int

const (
	directoryA2A directoryShape = iota // {"agents": [A2A cards]}
	directoryACP                       // {"agents": [ACP manifests]}, GET /agents
)

// serveDirectory lists the routed agents this caller may see, ranked by how many
// of the wanted tags one skill carries, then by name. Filter before you list: an
// agent the policy would not let this caller discover never appears, because its
// card would enter the caller's context.
func (s *Server) serveDirectory(w http.ResponseWriter, r *http.Request, shape directoryShape) {
	caller, idErr := s.ident.Identify(r.Context(), identity.Credentials{Header: r.Header, PeerCertificates: peerCerts(r)})
	if idErr != nil {
		s.log.Info("credentials refused; the caller is anonymous", "error", idErr, "path", r.URL.Path)
	}
	var wanted []string
	for _, t := range strings.Split(r.URL.Query().Get("tags"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			wanted = append(wanted, t)
		}
	}
	type entry struct {
		overlap int
		name    string
		card    *task.AgentCard
		version string
	}
	var visible []entry
	for _, rt := range s.routes {
		req := &task.Request{Operation: task.OpDiscover, Protocol: task.Protocol{Name: "writ", Method: r.Method + " " + r.URL.Path}}
		in := authz.BuildInput(&authz.Facts{Request: req, Caller: caller, Target: rt.target,
			HTTP:                  authz.HTTPInfo{Method: r.Method, Path: r.URL.Path, Host: r.Host, RemoteAddr: r.RemoteAddr},
			DefaultClassification: s.cfg.DefaultClassification})
		d, err := s.engine.Decide(r.Context(), in)
		ev := DecisionEvent{Time: time.Now(), ID: d.ID, Mode: ModeSidecar, Route: rt.agent.Name, Operation: task.OpDiscover,
			Protocol: req.Protocol, Caller: caller, Allow: d.Allow, DryRun: d.DryRun, Denials: d.Denials,
			Revision: d.Revision, CacheHit: d.CacheHit, Eval: d.Duration}
		if err != nil {
			ev.Error = err.Error()
		}
		s.hooks.Decided(ev)
		if !d.Allow {
			continue
		}
		card, version, err := s.publicCard(r.Context(), rt)
		if err != nil {
			card, version = configCard(rt), ""
		}
		skills := rt.target.Skills
		if len(skills) == 0 {
			skills = card.Skills
		}
		overlap := tagOverlap(skills, wanted)
		if len(wanted) > 0 && overlap == 0 {
			continue
		}
		visible = append(visible, entry{overlap, rt.agent.Name, card, version})
	}
	sort.Slice(visible, func(i, j int) bool {
		if visible[i].overlap != visible[j].overlap {
			return visible[i].overlap > visible[j].overlap
		}
		return visible[i].name < visible[j].name
	})
	items := make([]json.RawMessage, 0, len(visible))
	for _, e := range visible {
		var raw []byte
		var err error
		if shape == directoryACP {
			raw, err = acpListing.RenderCard(e.card, "")
		} else {
			raw, err = cardListing.RenderCard(e.card, e.version)
		}
		if err == nil {
			items = append(items, raw)
		}
	}
	body, _ := json.Marshal(map[string]any{"agents": items})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// tagOverlap is the largest number of wanted tags one skill carries.
func tagOverlap(skills []task.Skill, wanted []string) int {
	best := 0
	for _, sk := range skills {
		n := 0
		for _, w := range wanted {
			for _, t := range sk.Tags {
				if t == w {
					n++
					break
				}
			}
		}
		best = max(best, n)
	}
	return best
}

// configCard describes an agent from writ's config when its own card is
// unavailable (an ACP agent, or one that is down).
func configCard(rt *route) *task.AgentCard {
	return &task.AgentCard{Name: rt.agent.Name, Skills: rt.target.Skills,
		Interfaces: []task.Interface{{URL: rt.agent.PublicURL, Binding: "JSONRPC"}}}
}
