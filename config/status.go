package config

import (
	"net/url"
	"regexp"
	"strings"
)

// Status uploads writ's status document (OPA's status shape: labels,
// policy bundles, decision-log upload health, writ's own parts) to a
// status service, as OPA's status plugin does
// (docs/fleet.md#status). GET /v1/status on the admin listener serves the
// same document with or without it.
type Status struct {
	// URL is the status service's base http(s) URL.
	URL string `yaml:"url"`
	// TokenFile holds a bearer token sent to the service.
	TokenFile string `yaml:"token_file" writ:"path"`
	// PartitionName, when set, is appended to the upload's path
	// (/status/<partition_name>), as OPA's plugin does.
	PartitionName string `yaml:"partition_name"`
}

// labelKey is what a label's name may be (OPA labels are strings).
var labelKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,62}$`)

func (s *Status) validate(bad func(key, format string, args ...any)) {
	if s == nil {
		return
	}
	if p, err := url.Parse(s.URL); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil {
		bad("status.url", "must be the status service's http(s) URL, not %q", s.URL)
	}
	if strings.TrimSpace(s.TokenFile) != s.TokenFile {
		bad("status.token_file", "%q: must name a file, without surrounding spaces", s.TokenFile)
	}
	if strings.ContainsAny(s.PartitionName, "/?# ") {
		bad("status.partition_name", "must be one path segment, not %q", s.PartitionName)
	}
}

func validateLabels(labels map[string]string, bad func(key, format string, args ...any)) {
	for k, v := range labels {
		if !labelKey.MatchString(k) {
			bad("labels", "%q: a label's name is letters, digits, '_', '.', '-' (at most 63, not starting with a digit)", k)
		}
		if k == "id" || k == "version" || k == "app" || k == "writ_version" {
			bad("labels."+k, "is writ's own label (app, the instance id, OPA's and writ's versions)")
		}
		if len(v) > 256 {
			bad("labels."+k, "is longer than 256 characters")
		}
	}
}
