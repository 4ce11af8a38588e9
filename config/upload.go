package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Defaults of decision_log.upload:.
const (
	DefaultUploadResource    = "/logs"
	DefaultUploadBufferBytes = 16 << 20
	// DefaultUploadChunkBytes is OPA's upload_size_limit_bytes default: the
	// gzip'd size of one POST.
	DefaultUploadChunkBytes = 32 << 10
	DefaultUploadMinDelay   = 5 * time.Second
	DefaultUploadMaxDelay   = 10 * time.Second
	DefaultUploadQueue      = 10000
)

// DecisionUpload ships decision events to a collector in OPA's
// decision-log format (gzip'd JSON batches POSTed to url + resource), as
// OPA's decision-log plugin does (docs/fleet.md#decision-logs-upstream).
// The local decision log (output) keeps writing beside it.
type DecisionUpload struct {
	// URL is the collector service's base http(s) URL.
	URL string `yaml:"url"`
	// Resource is the path events are POSTed to (default /logs).
	Resource string `yaml:"resource"`
	// TokenFile holds a bearer token sent to the collector (re-read by
	// OPA's client at each upload).
	TokenFile string `yaml:"token_file" writ:"path"`
	// BufferBytes bounds the compressed events waiting for an upload
	// (default 16 MiB): beyond it the oldest batches are dropped, counted
	// and logged.
	BufferBytes int64 `yaml:"buffer_bytes"`
	// ChunkBytes bounds one upload's gzip'd body (default 32 KiB).
	ChunkBytes int64 `yaml:"chunk_bytes"`
	// MinDelay and MaxDelay bound the jittered wait between two uploads
	// (defaults 5s and 10s; whole seconds). A failed upload keeps its
	// batch for the next one.
	MinDelay time.Duration `yaml:"min_delay"`
	MaxDelay time.Duration `yaml:"max_delay"`
	// Queue bounds the decisions waiting to be encoded (default 10000):
	// when full a decision is dropped and counted, never waited for.
	Queue int `yaml:"queue"`
	// Lifecycle ships the lifecycle lines too (default true): task created,
	// state changed, artifact, protocol violation, eviction, the agent's
	// errors, push attempts and results, each an event of its own at path
	// writ/lifecycle/<type>. Off, decisions only.
	Lifecycle *bool `yaml:"lifecycle"`
	// Mask are JSON pointers of event members that must not leave the host
	// (OPA's mask form: /input/caller/user_id, /custom/identity_error);
	// each event lists what was erased of it.
	Mask []string `yaml:"mask"`
}

func (u *DecisionUpload) applyDefaults() {
	if u == nil {
		return
	}
	if u.Resource == "" {
		u.Resource = DefaultUploadResource
	}
	if u.BufferBytes == 0 {
		u.BufferBytes = DefaultUploadBufferBytes
	}
	if u.ChunkBytes == 0 {
		u.ChunkBytes = DefaultUploadChunkBytes
	}
	if u.MinDelay == 0 {
		u.MinDelay = DefaultUploadMinDelay
	}
	if u.MaxDelay == 0 {
		u.MaxDelay = max(DefaultUploadMaxDelay, u.MinDelay)
	}
	if u.Queue == 0 {
		u.Queue = DefaultUploadQueue
	}
	if u.Lifecycle == nil {
		on := true
		u.Lifecycle = &on
	}
}

// ShipsLifecycle reports whether the lifecycle lines are shipped with the
// decisions (decision_log.upload.lifecycle, default true).
func (u *DecisionUpload) ShipsLifecycle() bool {
	return u != nil && (u.Lifecycle == nil || *u.Lifecycle)
}

// uploadMaskRoots are the members of OPA's event a mask may erase from.
var uploadMaskRoots = []string{"input", "result", "custom", "labels", "metrics"}

func (u *DecisionUpload) validate(bad func(key, format string, args ...any)) {
	if u == nil {
		return
	}
	const key = "decision_log.upload"
	if p, err := url.Parse(u.URL); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil {
		bad(key+".url", "must be the collector's http(s) URL, not %q", u.URL)
	}
	if !strings.HasPrefix(u.Resource, "/") {
		bad(key+".resource", "must be a path starting with /, not %q", u.Resource)
	}
	if strings.TrimSpace(u.TokenFile) != u.TokenFile {
		bad(key+".token_file", "%q: must name a file, without surrounding spaces", u.TokenFile)
	}
	if u.BufferBytes < 1 || u.ChunkBytes < 1 || u.Queue < 1 {
		bad(key, "buffer_bytes, chunk_bytes and queue must be positive")
	} else if u.ChunkBytes > u.BufferBytes {
		bad(key+".chunk_bytes", "must be at most buffer_bytes (%d), not %d", u.BufferBytes, u.ChunkBytes)
	}
	for k, d := range map[string]time.Duration{key + ".min_delay": u.MinDelay, key + ".max_delay": u.MaxDelay} {
		if d < time.Second || d%time.Second != 0 {
			bad(k, "must be a whole number of seconds, at least 1s, not %s", d)
		}
	}
	if u.MaxDelay < u.MinDelay {
		bad(key+".max_delay", "must be at least min_delay (%s), not %s", u.MinDelay, u.MaxDelay)
	}
	for i, m := range u.Mask {
		root, _, _ := strings.Cut(strings.TrimPrefix(m, "/"), "/")
		ok := false
		for _, r := range uploadMaskRoots {
			ok = ok || r == root
		}
		if !strings.HasPrefix(m, "/") || !ok || strings.ContainsAny(m, " \t\"") {
			bad(fmt.Sprintf("%s.mask[%d]", key, i), "must be a JSON pointer into the event's %s, such as /input/caller/user_id, not %q",
				strings.Join(uploadMaskRoots, ", "), m)
		}
	}
}
