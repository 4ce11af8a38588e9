package mdlinks

import (
	"slices"
	"testing"
)

// TestSlug: the anchors GitHub gives the headings writ's documents have.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"WritTargetDown": "writtargetdown",
		"Envoy mode: writ behind Envoy (ext_proc or ext_authz)":       "envoy-mode-writ-behind-envoy-ext_proc-or-ext_authz",
		"Which agent: Envoy's route names it":                         "which-agent-envoys-route-names-it",
		"`writ inspect`: see what your policy will see":               "writ-inspect-see-what-your-policy-will-see",
		"Policy input (`writ/v1`)":                                    "policy-input-writv1",
		"Helm chart (`deploy/helm/writ`)":                             "helm-chart-deployhelmwrit",
		"What a restart (or another replica) resumes":                 "what-a-restart-or-another-replica-resumes",
		"Agents' answers":                                             "agents-answers",
		"How one request flows: one admission core, many front doors": "how-one-request-flows-one-admission-core-many-front-doors",
		"Déjà vu — twice":                                             "déjà-vu--twice",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestAnchors: ATX headings only, none from a code block, a repeated slug
// numbered as GitHub numbers it.
func TestAnchors(t *testing.T) {
	doc := "# Title\n\n## Usage ##\n\n```sh\n# not a heading\n```\n\n~~~~\n## nor this\n```\n~~~~\n" +
		"#no-space is text\n   ### Usage\n    # indented code\n## Usage\n"
	got := Anchors([]byte(doc))
	want := []string{"title", "usage", "usage-1", "usage-2"}
	if !slices.Equal(got, want) {
		t.Errorf("Anchors = %q, want %q", got, want)
	}
}

// TestLinks: inline links and images with their lines, link text over a line
// end, nothing from code spans or code blocks.
func TestLinks(t *testing.T) {
	doc := "See [the\nmatrix](docs/interop.md) and ![a chart](soak/soak.png \"title\").\n" +
		"`[not](a-link.md)` but [`code` text](state.md#retired-ids); [x](https://example.com).\n" +
		"A span over a line end: `[not\n](this.md)`.\n\n" +
		"```md\n[nor](that.md)\n```\n" +
		"An unclosed ` backtick\n\nends with its paragraph: [yes](#here).\n"
	got := Links([]byte(doc))
	want := []Link{
		{2, "docs/interop.md"}, {2, "soak/soak.png"},
		{3, "state.md#retired-ids"}, {3, "https://example.com"},
		{12, "#here"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Links =\n%v, want\n%v", got, want)
	}
}
