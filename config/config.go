// Package config loads and validates writ's configuration file: listeners,
// policies, identity sources, limits, the lifecycle store and the protected agents
// with their platform metadata. Validation happens once, at load; every error names
// the offending key.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/writ-authz/writ/adapters/names"
	"github.com/writ-authz/writ/authz/inputpaths"
	"github.com/writ-authz/writ/task"
)

// Config is the whole configuration file (writ.yaml). Every key is documented in
// docs/configuration.md with its default.
type Config struct {
	// Listen is the sidecar's address (default 127.0.0.1:8080).
	Listen string `yaml:"listen"`
	// Admin is the admin listener: health, metrics, policy status (default
	// 127.0.0.1:8477, see DefaultAdmin).
	Admin string `yaml:"admin"`
	// TLS, when set, makes the sidecar's listener (listen) serve HTTPS, and
	// with a client CA verify client certificates: the mTLS identity source.
	TLS *TLS `yaml:"tls"`
	// Log configures writ's own log (JSON lines on stderr).
	Log Log `yaml:"log"`
	// Policies are the policy directories or files. Empty (the default): the
	// shipped policies embedded in the binary.
	Policies []string `yaml:"policies" writ:"path"`
	// PolicyBundle takes the policy set from an OPA bundle service instead
	// (exclusive with Policies; config/bundle.go).
	PolicyBundle *PolicyBundle `yaml:"policy_bundle"`
	// PoliciesShadow are the directories or files of a shadow policy set:
	// loaded through the same gate as policies: (its own Rego tests, the
	// known requests), decided beside the live set after every decision,
	// off the request's path, and never part of the answer; where the two
	// disagree is logged and counted. Empty (the default): no shadow.
	PoliciesShadow []string `yaml:"policies_shadow" writ:"path"`
	// PolicyBundleShadow takes the shadow set from an OPA bundle service
	// instead (exclusive with PoliciesShadow; the same keys as
	// policy_bundle:, and the same gate).
	PolicyBundleShadow *PolicyBundle `yaml:"policy_bundle_shadow"`
	// ShadowQueue bounds the shadow evaluations waiting for the shadow's
	// worker (default DefaultShadowQueue, at most MaxShadowQueue): when it
	// is full an evaluation is dropped and counted, never waited for.
	ShadowQueue int `yaml:"shadow_queue"`
	// Labels name this writ in the fleet: on every uploaded decision and in
	// its status document (beside writ's own app, id and version).
	Labels map[string]string `yaml:"labels"`
	// Status uploads the status document to a status service (nil: served
	// on the admin listener only; config/status.go).
	Status *Status `yaml:"status"`
	// DryRun lets every request through and logs what the policy would deny.
	DryRun bool `yaml:"dry_run"`
	// DecisionCacheSize bounds the decision cache (default 10000; -1 disables).
	DecisionCacheSize int `yaml:"decision_cache_size"`
	// DefaultClassification applies when neither request nor token declares a
	// data classification (default internal).
	DefaultClassification task.Level `yaml:"default_classification"`
	Limits                Limits     `yaml:"limits"`
	Identity              Identity   `yaml:"identity"`
	Lifecycle             Lifecycle  `yaml:"lifecycle"`
	// Store says where the lifecycle is kept: file (the default of `writ
	// serve`), redis or memory.
	Store  Store   `yaml:"store"`
	Agents []Agent `yaml:"agents"`
	// Envoy runs writ as Envoy's external authorization service as well (off
	// unless a listener is named).
	Envoy Envoy `yaml:"envoy"`
	// Egress is egress mode: a listener for the protected agent's own
	// outbound calls (off unless egress.listen is set; config/egress.go).
	Egress Egress `yaml:"egress"`
	// Push configures push notifications, which writ handles itself.
	Push Push `yaml:"push"`
	// Cards configures the signatures of agent cards: the key writ signs the
	// cards it serves with, and the hosts a fetched card's key set may be on.
	Cards Cards `yaml:"cards"`
	// AuthZEN runs writ as an OpenID AuthZEN 1.0 policy decision point as
	// well (off unless authzen.listen is set).
	AuthZEN AuthZEN `yaml:"authzen"`
	// DecisionLog configures the audit stream of decisions and lifecycle events.
	DecisionLog DecisionLog `yaml:"decision_log"`
	// Metrics configures the Prometheus metrics on the admin listener.
	Metrics Metrics `yaml:"metrics"`
	// Tracing exports OpenTelemetry traces over OTLP (off unless present;
	// config/tracing.go).
	Tracing *Tracing `yaml:"tracing"`
	// AdminPprof serves /debug/pprof on the admin listener (off by default).
	AdminPprof bool `yaml:"admin_pprof"`
	// AdminTokenFile holds the bearer token the admin API's operator routes
	// (task records, the policy, reload, pprof) require. Unset, those routes
	// answer only on an admin listener bound to loopback alone.
	AdminTokenFile string `yaml:"admin_token_file" writ:"path"`
	// AdminHosts are host names the admin listener answers to besides its own
	// address, localhost and loopback (every request's Host is checked).
	AdminHosts []string `yaml:"admin_hosts"`
	// Tenants are facts about callers' tenants for the policies (facts.go).
	Tenants map[string]Tenant `yaml:"tenants"`

	// pos is the line of every key of the file the config was parsed from.
	pos positions
}

// AdminLoopback reports whether the admin listener is bound to loopback only
// (a loopback IP or localhost): the only case its operator routes answer
// without admin_token_file.
func (c *Config) AdminLoopback() bool { return loopback(c.Admin) }

// loopback reports whether a listen address is bound to loopback only (a
// loopback IP or localhost).
func loopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// EmbeddedPolicies reports whether the shipped policies embedded in the
// binary are the policy set (neither policies: nor policy_bundle:).
func (c *Config) EmbeddedPolicies() bool { return len(c.Policies) == 0 && c.PolicyBundle == nil }

// DefaultShadowQueue is shadow_queue's default: room for a burst of a
// thousand decisions while the shadow's worker catches up.
const DefaultShadowQueue = 1024

// MaxShadowQueue bounds shadow_queue: every queued evaluation holds a
// policy input.
const MaxShadowQueue = 1 << 16

// ShadowQueueSize is shadow_queue with its default applied.
func (c *Config) ShadowQueueSize() int {
	if c.ShadowQueue == 0 {
		return DefaultShadowQueue
	}
	return c.ShadowQueue
}

// Envoy configures Envoy mode: the ext_authz v3 servers and the ext_proc server
// that make the sidecar's decisions for an Envoy in front of the agents
// (docs/envoy.md).
type Envoy struct {
	// GRPCListen is the address of the gRPC ext_authz server
	// (envoy.service.auth.v3.Authorization/Check); empty is off.
	GRPCListen string `yaml:"grpc_listen"`
	// HTTPListen is the address of the HTTP ext_authz server (Envoy's
	// http_service mode); empty is off.
	HTTPListen string `yaml:"http_listen"`
	// HTTPPathPrefix is Envoy's http_service.path_prefix: the HTTP server strips
	// it from every path it receives (default none).
	HTTPPathPrefix string `yaml:"http_path_prefix"`
	// DryRun answers every check OK and logs what writ would have answered (the
	// would-be verdict is also in dynamic_metadata). It applies to the ext_authz
	// servers only; the top-level dry_run applies to policy decisions everywhere.
	DryRun bool `yaml:"dry_run"`
	// MaxRequestBytes is the largest request body writ accepts from Envoy; set
	// Envoy's with_request_body.max_request_bytes to the same value. Default
	// limits.max_body_bytes (0), which it must not exceed.
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
	// ParseBody reads the body Envoy sends (default true). Off, every request is
	// decided on method, path and headers alone, and operations that need their
	// body are refused by the adapters.
	ParseBody *bool `yaml:"parse_body"`
	// AllowPartialBody decides a request whose body Envoy cut short
	// (x-envoy-auth-partial-body: true) on method, path and headers alone,
	// instead of refusing it as too large (413).
	AllowPartialBody bool `yaml:"allow_partial_body"`
	// JWTAuthn, when set, takes the caller from the claims Envoy's jwt_authn
	// filter verified (opt-in).
	JWTAuthn *JWTAuthn `yaml:"jwt_authn"`
	// Reflection registers gRPC server reflection on the gRPC listener.
	Reflection bool `yaml:"reflection"`
	// ExtProcListen is the address of the ext_proc server
	// (envoy.service.ext_proc.v3.ExternalProcessor/Process), which decides
	// requests as ext_authz does and also sees the agent's answers; empty is
	// off. It reads envoy.max_request_bytes and envoy.jwt_authn too.
	ExtProcListen string `yaml:"ext_proc_listen"`
	// MaxResponseBytes bounds a JSON answer writ holds to observe it through
	// ext_proc (default DefaultMaxResponseBytes, at most MaxResponseBytesLimit);
	// a larger answer is refused as the agent's fault (502). SSE streams are
	// bounded per event (limits.max_event_bytes), not here.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// RequireRouteName (default true) refuses a request from Envoy whose route
	// names no agent (writ-agent, docs/envoy.md): Envoy chose the agent
	// it forwards to, so writ decides for that agent and never re-derives it
	// from bytes Envoy's router may have read differently. Off, a request
	// without the name is routed by writ itself, and only when its raw path
	// and authority are in canonical form.
	RequireRouteName *bool `yaml:"require_route_name"`
}

// RequiresRouteName reports whether an Envoy request must name its agent
// (envoy.require_route_name, default true).
func (e *Envoy) RequiresRouteName() bool { return e.RequireRouteName == nil || *e.RequireRouteName }

// DefaultMaxResponseBytes is envoy.max_response_bytes when unset.
const DefaultMaxResponseBytes = 4 << 20

// MaxResponseBytesLimit is the largest envoy.max_response_bytes: the
// sidecar's own bound on an answer it reads whole (proxy.MaxAnswerBytes).
const MaxResponseBytesLimit = 32 << 20

// ResponseLimit is envoy.max_response_bytes, or its default when unset.
func (e *Envoy) ResponseLimit() int64 {
	if e.MaxResponseBytes > 0 {
		return e.MaxResponseBytes
	}
	return DefaultMaxResponseBytes
}

// JWTAuthn names where Envoy's jwt_authn filter leaves verified claims
// (payload_in_metadata) and whose claims writ believes without verifying the
// token itself.
type JWTAuthn struct {
	// Namespace is the metadata_context filter_metadata namespace (default
	// envoy.filters.http.jwt_authn).
	Namespace string `yaml:"namespace"`
	// Issuers are the iss values trusted that way; required. A claim set from
	// any other issuer is ignored.
	Issuers []string `yaml:"issuers"`
}

// Enabled reports whether any ext_authz listener is configured.
func (e *Envoy) Enabled() bool { return e.GRPCListen != "" || e.HTTPListen != "" }

// BodyLimit is the largest body accepted from Envoy: max_request_bytes, or
// limits.max_body_bytes when it is unset (0).
func (e *Envoy) BodyLimit(l Limits) int64 {
	if e.MaxRequestBytes > 0 {
		return e.MaxRequestBytes
	}
	return l.MaxBodyBytes
}

// ParsesBody reports whether the body Envoy sends is read (parse_body).
func (e *Envoy) ParsesBody() bool { return e.ParseBody == nil || *e.ParseBody }

// DefaultJWTAuthnNamespace is the filter_metadata namespace of Envoy's jwt_authn
// filter.
const DefaultJWTAuthnNamespace = "envoy.filters.http.jwt_authn"

// The bounds of limits.max_referenced_tasks: the default, and the most a
// config may set (each referenced task is a store read of one request).
const (
	DefaultMaxReferencedTasks = 16
	MaxReferencedTasksCeiling = 256
)

// Limits bound every request writ handles.
type Limits struct {
	// MaxBodyBytes is the largest request body (default 1 MiB).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxJSONDepth is the deepest JSON nesting accepted (default 32).
	MaxJSONDepth int `yaml:"max_json_depth"`
	// MaxHeaderBytes bounds request headers (default 64 KiB).
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// ReadHeaderTimeout bounds reading request headers (default 5s): slow-loris.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request (default 30s).
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// UpstreamTimeout bounds a non-streaming upstream answer (default 60s).
	UpstreamTimeout time.Duration `yaml:"upstream_timeout"`
	// StreamIdleTimeout closes a stream with no event for this long (default 5m).
	StreamIdleTimeout time.Duration `yaml:"stream_idle_timeout"`
	// MaxEventBytes bounds one upstream SSE event (default 4 MiB).
	MaxEventBytes int `yaml:"max_event_bytes"`
	// MaxReferencedTasks bounds the tasks one message may reference (A2A
	// referenceTaskIds; default 16, at most MaxReferencedTasksCeiling). Each
	// distinct id costs one lifecycle store read before the decision, so the
	// bound is what one request may cost; a message over it is refused.
	MaxReferencedTasks int `yaml:"max_referenced_tasks"`
	// CardCacheTTL is how long an agent's card is served from cache (default 1m).
	CardCacheTTL time.Duration `yaml:"card_cache_ttl"`
	// CardFetchTimeout bounds one fetch of an agent's card (default 10s).
	CardFetchTimeout time.Duration `yaml:"card_fetch_timeout"`
	// CardFailureTTL is how long a failed card fetch is remembered before the
	// agent is asked again (default 5s).
	CardFailureTTL time.Duration `yaml:"card_failure_ttl"`
	// DirectoryCardWait is how long the directory waits for one agent's card
	// before it lists the agent from its cached card or writ's config (default
	// 500ms).
	DirectoryCardWait time.Duration `yaml:"directory_card_wait"`
	// AllowChunkedRequests accepts request bodies without Content-Length
	// (Transfer-Encoding: chunked). Off by default: writ reads whole bodies anyway,
	// and ambiguous framing is how request smuggling works.
	AllowChunkedRequests bool `yaml:"allow_chunked_requests"`
}

// Lifecycle configures the task lifecycle store.
type Lifecycle struct {
	// MaxTasks bounds the tasks tracked (default 100000).
	MaxTasks int `yaml:"max_tasks"`
	// MaxTasksPerOwner bounds the tasks one owner may have tracked (default 10000).
	MaxTasksPerOwner int `yaml:"max_tasks_per_owner"`
	// TTL forgets a task this long after its last update (default 24h).
	TTL time.Duration `yaml:"ttl"`
	// MaxFollowers bounds the tasks writ follows at once after their request
	// returned, to deliver their push notifications (default 256), and
	// MaxFollowersPerOwner those of one owner (default a quarter of them, at
	// least 1): one caller's running tasks cannot take every follower. A task
	// over the bound waits (with a store: kept, and followed when a follower
	// is free here or on another replica).
	MaxFollowers         int `yaml:"max_followers"`
	MaxFollowersPerOwner int `yaml:"max_followers_per_owner"`
	// UnknownTasks decides follow-ups on tasks writ never saw: "deny" (default,
	// answered as TaskNotFound) or "allow" (for migrations: the policy decides).
	UnknownTasks string `yaml:"unknown_tasks"`
	// RetiredIDs sizes the set of every task and context id the store has
	// recorded, which never forgets: an id writ held once and no longer holds
	// (evicted, expired) is answered not found and never claimed again.
	RetiredIDs RetiredIDs `yaml:"retired_ids"`
}

// RetiredIDs sizes the retired-id set (docs/state.md, "Retired ids"): a Bloom filter,
// about 39 bits an id at the default rate (4.8 MB for a million ids).
type RetiredIDs struct {
	// Capacity is how many ids (tasks and contexts) the set holds at
	// FalsePositiveRate (default ten times max_tasks, at least 1000000).
	// Beyond it the rate rises: more fresh ids are refused, none is let
	// through. The file and Redis stores keep the size they were made with.
	Capacity int `yaml:"capacity"`
	// FalsePositiveRate is the share of fresh ids the set answers "seen"
	// for, at its capacity (default 1e-6, at least 1e-8): such an id is
	// refused (a follow-up under unknown_tasks: allow, a context a caller
	// names), never let through.
	FalsePositiveRate float64 `yaml:"false_positive_rate"`
}

// Agent is one protected agent: where its requests arrive, where they go, and the
// platform metadata that policies read and callers never see.
type Agent struct {
	// Name identifies the agent to policies (input.target.name).
	Name string `yaml:"name"`
	// Route is the path prefix writ serves the agent under (a sidecar: "/").
	Route string `yaml:"route"`
	// Hosts are the host names the agent is served under (the request's Host
	// or :authority, port ignored, case-insensitive): exact names and
	// "*.suffix" wildcards. Empty: any host. A request goes to the agents whose
	// hosts match it best (an exact name, else the longest wildcard, else the
	// agents with no hosts), then to the longest route among them.
	Hosts []string `yaml:"hosts"`
	// Upstream is the agent's own base URL.
	Upstream string `yaml:"upstream"`
	// Protocol is a protocol of writ's table (package adapters: a2a, acp,
	// a2a-grpc) or auto (the default: each request's protocol detected from
	// its path, ACP for /runs, /agents, /session(s) and A2A otherwise). A
	// protocol served over gRPC (a2a-grpc) needs grpc_listen.
	Protocol string `yaml:"protocol"`
	// GRPCListen is the address of the agent's own gRPC listener (h2c, or
	// TLS and mTLS as tls: says for listen), required for, and only for, a
	// protocol served over gRPC: a gRPC call names a method, not a route, so
	// each such agent has a listener of its own. The agent's upstream is
	// then its gRPC address (http:// for h2c, https:// for TLS).
	GRPCListen string `yaml:"grpc_listen"`
	// PublicURL is the URL callers use; the served card advertises it.
	PublicURL string `yaml:"public_url"`
	// JSONRPCPath is where the agent serves A2A JSON-RPC, relative to Route
	// (default "/").
	JSONRPCPath string `yaml:"jsonrpc_path"`
	// Owner is the team that owns the agent.
	Owner string `yaml:"owner"`
	// Tenants the agent serves; empty serves every tenant.
	Tenants []string `yaml:"tenants"`
	// MaxDataClassification is the highest classification the agent may receive.
	MaxDataClassification task.Level `yaml:"max_data_classification"`
	// SecuritySchemes are the auth scheme kinds the agent accepts (oauth2,
	// openidconnect, http, apikey, mtls).
	SecuritySchemes []string `yaml:"security_schemes"`
	// Skills override the skills of the agent's card for policies and discovery.
	Skills []task.Skill `yaml:"skills"`
	// CallbackHosts are the hosts push callbacks for this agent's tasks may
	// go to (facts.go: data.writ.config.callbacks.targets[name]).
	CallbackHosts []string `yaml:"callback_hosts"`
	// RequireSignedCard refuses the agent's card unless a signature on it
	// verifies (a card whose signatures do not verify is refused either way).
	RequireSignedCard bool `yaml:"require_signed_card"`
	// CardKeys is a JWKS file: the only keys the agent's card may be signed
	// with (its signatures' jku is then never fetched). Empty: the key set
	// each signature's jku names.
	CardKeys string `yaml:"card_keys" writ:"path"`
}

// Cards configures card signatures: writ signs every card it serves (it
// rewrites the agent's, whose own signature would no longer verify), and
// verifies a card an agent serves signed.
type Cards struct {
	// SigningKeyFile is writ's ES256 private key (a JWK): read when it
	// exists, generated and written (0600) when it does not. Empty: a key
	// generated at start and never written (the served cards' kid changes
	// with every start).
	SigningKeyFile string `yaml:"signing_key_file" writ:"path"`
	// JKUTrustedHosts may be named by a card signature's jku although they
	// resolve to private or loopback addresses, and over http (for tests and
	// development: each entry is a hole in the card-fetch SSRF guard).
	JKUTrustedHosts []string `yaml:"jku_trusted_hosts"`
}

// Push configures in-process push notifications: writ keeps the callers' push
// configs, strips them from what the agents receive, answers the push-config
// operations, and delivers every state change through an SSRF-guarded client.
type Push struct {
	// Disabled leaves push to the agents (configs are forwarded as sent).
	Disabled bool `yaml:"disabled"`
	// TrustedHosts may resolve to private addresses and use http (keep it short:
	// each entry is a hole in the SSRF guard).
	TrustedHosts []string `yaml:"trusted_hosts"`
	// Workers deliver in parallel (default 4).
	Workers int `yaml:"workers"`
	// MaxInFlightPerHost and MaxInFlightPerOwner bound the deliveries one
	// receiver host (host:port), and one owner's notifications, have in flight
	// (default half the workers, at least 1): a hanging receiver or one caller's
	// flood of callbacks holds no more than its share of the workers.
	MaxInFlightPerHost  int `yaml:"max_in_flight_per_host"`
	MaxInFlightPerOwner int `yaml:"max_in_flight_per_owner"`
	// QueueSize caps notifications waiting or in flight (default 10000).
	QueueSize int `yaml:"queue_size"`
	// MaxAttempts per notification (default 5).
	MaxAttempts int `yaml:"max_attempts"`
	// AttemptTimeout bounds one delivery attempt (default 10s).
	AttemptTimeout time.Duration `yaml:"attempt_timeout"`
	// MaxResponseBytes read from a receiver (default 64 KiB).
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// MaxConfigsPerTask (default 10) and MaxConfigsPerOwner (default 1000) bound
	// the configs writ keeps.
	MaxConfigsPerTask  int `yaml:"max_configs_per_task"`
	MaxConfigsPerOwner int `yaml:"max_configs_per_owner"`
}

// DecisionLog configures the decision log: one JSON line per decision and per
// lifecycle event, never message content or credentials.
type DecisionLog struct {
	// Output is "stdout" (default), "stderr", "off", or a file path (rotated by size).
	Output string `yaml:"output" writ:"path,except=stdout|stderr|off"`
	// MaxSizeMB rotates the file beyond this size (default 100).
	MaxSizeMB int `yaml:"max_size_mb"`
	// MaxBackups rotated files are kept (default 5).
	MaxBackups int `yaml:"max_backups"`
	// Format is "writ" (default) or "opa" (OPA's decision-log shape, for existing
	// OPA log pipelines).
	Format string `yaml:"format"`
	// Buffer bounds the lines waiting to be written (default 10000); beyond it
	// lines are dropped and counted, never blocking a request.
	Buffer int `yaml:"buffer"`
	// CheckpointEvery writes a checkpoint line after this many lines (default
	// 1000, at most 1000000), and at every rotation and at close: the digest
	// of every line before it, signed when SigningKeyFile is set.
	CheckpointEvery int `yaml:"checkpoint_every"`
	// SigningKeyFile signs the checkpoints: a PEM private key, Ed25519 or
	// ECDSA P-256 (JWS EdDSA or ES256). Without one, checkpoints are unsigned
	// and the log is tamper-evident only against edits that leave the digest
	// chain broken.
	SigningKeyFile string `yaml:"signing_key_file" writ:"path"`
	// IncludeInput puts on each decision line the policy input the decision
	// was made on (writ/v1), redacted as the rest of the line is, so that the
	// log is a corpus `writ policy replay` can replay a proposed policy on.
	// Off by default: a line grows by the input's size.
	IncludeInput bool `yaml:"include_input"`
	// Mask are members of the input left out of each line's input: paths
	// such as input.caller.user_id or input.caller.claims.email (a list's
	// member is masked in every element). Each line says which were masked.
	Mask []string `yaml:"mask"`
	// Upload, when set, ships the decisions to a collector as well, in
	// OPA's decision-log format (config/upload.go).
	Upload *DecisionUpload `yaml:"upload"`
}

// The decision log's checkpoint interval: its default and its bound.
const (
	DefaultCheckpointEvery = 1000
	MaxCheckpointEvery     = 1_000_000
)

// Metrics configures the Prometheus metrics.
type Metrics struct {
	// TenantLabels adds the caller's tenant as a label on decision metrics (off by
	// default: label cardinality stays bounded).
	TenantLabels bool `yaml:"tenant_labels"`
}

// Defaults.
const (
	DefaultListen = "127.0.0.1:8080"
	// DefaultAdmin is the admin listener's address. Its port is one no common
	// tool takes by default: not Prometheus's 9090 nor the 9091-9999 range
	// Prometheus allocates to exporters and its own components (Pushgateway,
	// Alertmanager, node exporter), not 8080-8099 (web servers, proxies), 8181
	// (OPA), 8200 (Vault), 8500 (Consul), 9901 (Envoy's admin), 15000-15021
	// (Istio), 6060 (Go's pprof and godoc) or 9191 (OPA-Envoy's gRPC, which
	// writ's Envoy examples use).
	DefaultAdmin = "127.0.0.1:8477"
)

// Load reads, decodes and validates a config file. Every relative path in
// it is taken from the file's directory (paths.go). Its error is a
// *Problems naming the file, and each problem's key and line.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := parse(raw, filepath.Dir(path))
	var ps *Problems
	if errors.As(err, &ps) {
		ps.File = path
	}
	return c, err
}

// Parse decodes and validates a config document: ${ENV} and
// ${ENV:-default} are expanded in values, unknown keys, values of the wrong
// kind and bare numbers given as durations are refused, then every key is
// validated. The error is a *Problems: each problem names its key path and
// line (agents[0].upstrem: unknown key (did you mean upstream?)). Relative
// paths in it stay relative to the working directory: it has no file.
func Parse(raw []byte) (*Config, error) { return parse(raw, "") }

// parse is Parse with relative paths taken from dir ("" for the working
// directory).
func parse(raw []byte, dir string) (*Config, error) {
	c := Config{pos: positions{}}
	ps := &problems{pos: c.pos}
	decodeTree(raw, &c, ps)
	if err := ps.err(); err != nil {
		return nil, err
	}
	resolvePaths(&c, dir)
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) applyDefaults() {
	dl := &c.DecisionLog
	if dl.Output == "" {
		dl.Output = "stdout"
	}
	if dl.MaxSizeMB == 0 {
		dl.MaxSizeMB = 100
	}
	if dl.MaxBackups == 0 {
		dl.MaxBackups = 5
	}
	if dl.Format == "" {
		dl.Format = "writ"
	}
	if dl.Buffer == 0 {
		dl.Buffer = 10000
	}
	if dl.CheckpointEvery == 0 {
		dl.CheckpointEvery = DefaultCheckpointEvery
	}
	p := &c.Push
	if p.Workers == 0 {
		p.Workers = 4
	}
	if p.QueueSize == 0 {
		p.QueueSize = 10000
	}
	if p.MaxInFlightPerHost == 0 {
		p.MaxInFlightPerHost = max(1, p.Workers/2)
	}
	if p.MaxInFlightPerOwner == 0 {
		p.MaxInFlightPerOwner = max(1, p.Workers/2)
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 5
	}
	if p.AttemptTimeout == 0 {
		p.AttemptTimeout = 10 * time.Second
	}
	if p.MaxResponseBytes == 0 {
		p.MaxResponseBytes = 64 << 10
	}
	if p.MaxConfigsPerTask == 0 {
		p.MaxConfigsPerTask = 10
	}
	if p.MaxConfigsPerOwner == 0 {
		p.MaxConfigsPerOwner = 1000
	}
	c.PolicyBundle.applyDefaults()
	c.PolicyBundleShadow.applyDefaults()
	c.DecisionLog.Upload.applyDefaults()
	c.Tracing.applyDefaults()
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Admin == "" {
		c.Admin = DefaultAdmin
	}
	if c.DefaultClassification == "" {
		c.DefaultClassification = task.Internal
	}
	l := &c.Limits
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = 1 << 20
	}
	if l.MaxJSONDepth == 0 {
		l.MaxJSONDepth = 32
	}
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = 64 << 10
	}
	if l.MaxEventBytes == 0 {
		l.MaxEventBytes = 4 << 20
	}
	if l.MaxReferencedTasks == 0 {
		l.MaxReferencedTasks = DefaultMaxReferencedTasks
	}
	def(&l.ReadHeaderTimeout, 5*time.Second)
	def(&l.ReadTimeout, 30*time.Second)
	def(&l.UpstreamTimeout, 60*time.Second)
	def(&l.StreamIdleTimeout, 5*time.Minute)
	def(&l.CardCacheTTL, time.Minute)
	def(&l.CardFetchTimeout, 10*time.Second)
	def(&l.CardFailureTTL, 5*time.Second)
	def(&l.DirectoryCardWait, 500*time.Millisecond)
	lc := &c.Lifecycle
	if lc.MaxTasks == 0 {
		lc.MaxTasks = 100000
	}
	if lc.MaxTasksPerOwner == 0 {
		lc.MaxTasksPerOwner = 10000
	}
	if lc.MaxFollowers == 0 {
		lc.MaxFollowers = 256
	}
	if lc.MaxFollowersPerOwner == 0 {
		lc.MaxFollowersPerOwner = max(1, lc.MaxFollowers/4)
	}
	def(&lc.TTL, 24*time.Hour)
	if lc.UnknownTasks == "" {
		lc.UnknownTasks = "deny"
	}
	if lc.RetiredIDs.Capacity == 0 {
		lc.RetiredIDs.Capacity = max(1_000_000, 10*lc.MaxTasks)
	}
	if lc.RetiredIDs.FalsePositiveRate == 0 {
		lc.RetiredIDs.FalsePositiveRate = task.DefaultRetiredFalsePositive
	}
	c.Envoy.applyDefaults()
	c.AuthZEN.applyDefaults()
	c.Store.applyDefaults()
	c.Egress.applyDefaults(c.Agents)
	for i := range c.Agents {
		a := &c.Agents[i]
		if a.Protocol == "" {
			a.Protocol = names.Auto
		}
		if a.Route == "" {
			a.Route = "/"
		}
		if a.JSONRPCPath == "" {
			a.JSONRPCPath = "/"
		}
	}
}

// Validate checks every key. The error is a *Problems listing every
// offending key (with its line when the config came from a file).
func (c *Config) Validate() error {
	ps := &problems{pos: c.pos}
	bad := ps.add
	for key, addr := range map[string]string{"listen": c.Listen, "admin": c.Admin} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			bad(key, "%q is not host:port", addr)
		}
	}
	for i, h := range c.AdminHosts {
		if strings.HasPrefix(h, "*.") {
			bad(fmt.Sprintf("admin_hosts[%d]", i), "%q: admin hosts are exact names, not wildcards", h)
		} else if err := validHostPattern(h); err != nil {
			bad(fmt.Sprintf("admin_hosts[%d]", i), "%v", err)
		}
	}
	if c.AdminTokenFile != "" && strings.TrimSpace(c.AdminTokenFile) != c.AdminTokenFile {
		bad("admin_token_file", "%q: the path has surrounding spaces", c.AdminTokenFile)
	}
	if c.DecisionCacheSize < -1 {
		bad("decision_cache_size", "must be -1 (off), 0 (default) or positive")
	}
	if c.DefaultClassification.Rank() < 0 {
		bad("default_classification", "unknown level %q", c.DefaultClassification)
	}
	l := c.Limits
	if l.MaxBodyBytes < 0 || l.MaxJSONDepth < 0 || l.MaxHeaderBytes < 0 || l.MaxEventBytes < 0 {
		bad("limits", "sizes must be positive")
	}
	if l.MaxReferencedTasks < 0 || l.MaxReferencedTasks > MaxReferencedTasksCeiling {
		bad("limits.max_referenced_tasks", "must be from 1 to %d (0: the default, %d), not %d",
			MaxReferencedTasksCeiling, DefaultMaxReferencedTasks, l.MaxReferencedTasks)
	}
	for key, d := range map[string]time.Duration{"limits.read_header_timeout": l.ReadHeaderTimeout,
		"limits.read_timeout": l.ReadTimeout, "limits.upstream_timeout": l.UpstreamTimeout,
		"limits.stream_idle_timeout": l.StreamIdleTimeout, "lifecycle.ttl": c.Lifecycle.TTL,
		"limits.card_cache_ttl": l.CardCacheTTL, "limits.card_fetch_timeout": l.CardFetchTimeout,
		"limits.card_failure_ttl": l.CardFailureTTL, "limits.directory_card_wait": l.DirectoryCardWait} {
		if d < 0 {
			bad(key, "must be positive")
		}
	}
	if p := c.Push; p.Workers < 0 || p.QueueSize < 0 || p.MaxInFlightPerHost < 0 || p.MaxInFlightPerOwner < 0 || p.MaxAttempts < 0 || p.AttemptTimeout < 0 ||
		p.MaxResponseBytes < 0 || p.MaxConfigsPerTask < 0 || p.MaxConfigsPerOwner < 0 {
		bad("push", "bounds must be positive")
	}
	for i, h := range c.Push.TrustedHosts {
		if h == "" || strings.ContainsAny(h, "/@ ") {
			bad(fmt.Sprintf("push.trusted_hosts[%d]", i), "must be a host name or an IP address, not %q", h)
		}
	}
	if f := c.DecisionLog.Format; f != "writ" && f != "opa" {
		bad("decision_log.format", "must be writ or opa, not %q", f)
	}
	if c.DecisionLog.MaxSizeMB < 0 || c.DecisionLog.MaxBackups < 0 || c.DecisionLog.Buffer < 0 {
		bad("decision_log", "sizes must be positive")
	}
	if n := c.DecisionLog.CheckpointEvery; n < 0 || n > MaxCheckpointEvery {
		bad("decision_log.checkpoint_every", "must be from 1 to %d lines (0: the default, %d), not %d",
			MaxCheckpointEvery, DefaultCheckpointEvery, n)
	}
	for i, m := range c.DecisionLog.Mask {
		if err := inputpaths.CheckMask(m); err != nil {
			bad(fmt.Sprintf("decision_log.mask[%d]", i), "%v", err)
		}
	}
	c.DecisionLog.Upload.validate(bad)
	c.Status.validate(bad)
	validateLabels(c.Labels, bad)
	if k := c.DecisionLog.SigningKeyFile; k != "" && strings.TrimSpace(k) == "" {
		bad("decision_log.signing_key_file", "must name a file")
	}
	if k := c.Cards.SigningKeyFile; k != "" && strings.TrimSpace(k) != k {
		bad("cards.signing_key_file", "%q: must name a file, without surrounding spaces", k)
	}
	for i, h := range c.Cards.JKUTrustedHosts {
		if h == "" || (strings.ContainsAny(h, "/@ :") && net.ParseIP(strings.Trim(h, "[]")) == nil) {
			bad(fmt.Sprintf("cards.jku_trusted_hosts[%d]", i), "must be a host name or an IP address (no scheme, port or path), not %q", h)
		}
	}
	if lc := c.Lifecycle; lc.MaxTasks < 0 || lc.MaxTasksPerOwner < 0 || lc.MaxFollowers < 0 || lc.MaxFollowersPerOwner < 0 {
		bad("lifecycle", "task and follower bounds must be positive")
	}
	if u := c.Lifecycle.UnknownTasks; u != "deny" && u != "allow" {
		bad("lifecycle.unknown_tasks", "must be deny or allow, not %q", u)
	}
	if r := c.Lifecycle.RetiredIDs; r.Capacity < 1 {
		bad("lifecycle.retired_ids.capacity", "must be positive, not %d", r.Capacity)
	} else if r.FalsePositiveRate < task.MinRetiredFalsePositive || r.FalsePositiveRate >= 0.5 {
		bad("lifecycle.retired_ids.false_positive_rate", "must be between %g and 0.5, not %g", task.MinRetiredFalsePositive, r.FalsePositiveRate)
	} else if _, err := task.NewRetired(r.Capacity, r.FalsePositiveRate); err != nil {
		bad("lifecycle.retired_ids", "%v", err)
	}
	c.Envoy.validate(c, bad)
	c.AuthZEN.validate(c, bad)
	c.Store.validate(bad)
	c.PolicyBundle.validate("policy_bundle", "policies", len(c.Policies) > 0, bad)
	c.PolicyBundleShadow.validate("policy_bundle_shadow", "policies_shadow", len(c.PoliciesShadow) > 0, bad)
	if b, sb := c.PolicyBundle, c.PolicyBundleShadow; b != nil && sb != nil && b.PersistDir != "" && filepath.Clean(b.PersistDir) == filepath.Clean(sb.PersistDir) {
		bad("policy_bundle_shadow.persist_dir", "must differ from policy_bundle.persist_dir (%s): each keeps its own last good bundle", b.PersistDir)
	}
	c.Tracing.validate(bad)
	c.Log.validate(bad)
	c.TLS.validate(bad)
	for i, p := range c.Policies {
		if strings.TrimSpace(p) == "" {
			bad(fmt.Sprintf("policies[%d]", i), "must name a directory or file")
		}
	}
	for i, p := range c.PoliciesShadow {
		if strings.TrimSpace(p) == "" {
			bad(fmt.Sprintf("policies_shadow[%d]", i), "must name a directory or file")
		}
	}
	if c.ShadowQueue < 0 || c.ShadowQueue > MaxShadowQueue {
		bad("shadow_queue", "must be 0 (the default, %d) or between 1 and %d, not %d", DefaultShadowQueue, MaxShadowQueue, c.ShadowQueue)
	}
	if len(c.Agents) == 0 {
		bad("agents", "at least one agent is required")
	}
	agentNames := map[string]bool{}
	served := map[string]string{} // host pattern + route → the agent's key
	for i, a := range c.Agents {
		key := fmt.Sprintf("agents[%d]", i)
		if a.Name == "" {
			bad(key+".name", "required")
		} else if agentNames[a.Name] {
			bad(key+".name", "%q is used twice", a.Name)
		}
		agentNames[a.Name] = true
		if !strings.HasPrefix(a.Route, "/") {
			bad(key+".route", "must start with /, got %q", a.Route)
		} else if why := nonCanonicalRoute(a.Route); why != "" {
			bad(key+".route", "%q is not a plain path (%s): every router must read it alike", a.Route, why)
		}
		hosts := a.Hosts
		if len(hosts) == 0 {
			hosts = []string{""} // any host
		}
		for j, h := range hosts {
			if len(a.Hosts) > 0 {
				if err := validHostPattern(h); err != nil {
					bad(fmt.Sprintf("%s.hosts[%d]", key, j), "%v", err)
					continue
				}
			}
			pair := strings.ToLower(h) + " " + strings.TrimSuffix(a.Route, "/")
			if other, dup := served[pair]; dup {
				what := "any host"
				if h != "" {
					what = "host " + h
				}
				bad(key+".route", "%s on %s is already %s's: a request could not tell them apart", a.Route, what, other)
				continue
			}
			served[pair] = key
		}
		if u, err := url.Parse(a.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(key+".upstream", "must be an http(s) URL, got %q", a.Upstream)
		}
		if a.PublicURL != "" {
			if u, err := url.Parse(a.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(key+".public_url", "must be an http(s) URL, got %q", a.PublicURL)
			}
		}
		if a.Protocol != names.Auto && !names.Known(a.Protocol) {
			hint := ""
			if len(names.All()) == 0 {
				hint = " (no protocol is registered: the program does not link package adapters)"
			}
			bad(key+".protocol", "must be %s, not %q%s", names.Choices(), a.Protocol, hint)
		}
		checkGRPCListen(a, key, bad)
		if names.GRPC(a.Protocol) && (c.Envoy.GRPCListen != "" || c.Envoy.ExtProcListen != "") && strings.TrimSuffix(a.Route, "/") != "" {
			// Behind Envoy the path writ decides on is the one Envoy routed:
			// the call's method, which no route but / covers.
			bad(key+".route", "%q: behind Envoy (envoy.grpc_listen, envoy.ext_proc_listen) a gRPC call's path is its method (/package.Service/Method), never below a route: use / (and hosts: to tell gRPC agents apart)", a.Route)
		}
		if !strings.HasPrefix(a.JSONRPCPath, "/") {
			bad(key+".jsonrpc_path", "must start with /")
		}
		if a.MaxDataClassification == "" {
			bad(key+".max_data_classification", "required (public, internal, confidential or restricted)")
		} else if a.MaxDataClassification.Rank() < 0 {
			bad(key+".max_data_classification", "unknown level %q", a.MaxDataClassification)
		}
		if len(a.SecuritySchemes) == 0 {
			bad(key+".security_schemes", "required: the auth scheme kinds the agent accepts")
		}
		if a.CardKeys != "" && strings.TrimSpace(a.CardKeys) != a.CardKeys {
			bad(key+".card_keys", "%q: must name a JWKS file, without surrounding spaces", a.CardKeys)
		}
		for j, s := range a.SecuritySchemes {
			switch task.SchemeKind(s) {
			case task.SchemeAPIKey, task.SchemeHTTP, task.SchemeOAuth2, task.SchemeOIDC, task.SchemeMTLS:
			default:
				bad(fmt.Sprintf("%s.security_schemes[%d]", key, j), "unknown scheme kind %q (apikey, http, oauth2, openidconnect, mtls)", s)
			}
		}
	}
	c.Egress.validate(c, bad)
	c.validateFacts(bad)
	return ps.err()
}

// nonCanonicalRoute says why a route is not a plain path, "" when it is:
// requests are routed on their canonical path (no percent-encoding of what
// needs none, no dot segments, no repeated slashes), which such a route
// could never match as written.
func nonCanonicalRoute(r string) string {
	if strings.ContainsAny(r, "%\\?#") {
		return "no %, \\, ? or #"
	}
	segs := strings.Split(r[1:], "/")
	for i, seg := range segs {
		switch {
		case seg == "." || seg == "..":
			return "no . or .. segments"
		case seg == "" && i < len(segs)-1:
			return "no repeated slashes"
		}
	}
	return ""
}

// validHostPattern accepts a host name ("agents.bank.ae", "localhost", an IP
// literal) or a leading wildcard ("*.agents.bank.ae"), never a port, a scheme
// or a path.
func validHostPattern(h string) error {
	if net.ParseIP(h) != nil {
		return nil
	}
	name := strings.TrimPrefix(h, "*.")
	if name == "" || strings.ContainsAny(name, "*:/@ \\") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
		return fmt.Errorf("%q is not a host name or *.suffix (no port, scheme or path)", h)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%q is not a host name", h)
		}
		for _, c := range label {
			if !(c == '-' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
				return fmt.Errorf("%q is not a host name", h)
			}
		}
	}
	return nil
}

// Agent returns the agent named name.
func (c *Config) Agent(name string) (*Agent, bool) {
	for i := range c.Agents {
		if c.Agents[i].Name == name {
			return &c.Agents[i], true
		}
	}
	return nil, false
}

// Route returns the agent whose route is the longest prefix of path, and the path
// below that route (starting with "/").
func (c *Config) Route(path string) (*Agent, string, bool) {
	var best *Agent
	for i := range c.Agents {
		a := &c.Agents[i]
		prefix := strings.TrimSuffix(a.Route, "/")
		if path == prefix || strings.HasPrefix(path, prefix+"/") || prefix == "" {
			if best == nil || len(a.Route) > len(best.Route) {
				best = a
			}
		}
	}
	if best == nil {
		return nil, "", false
	}
	rest := strings.TrimPrefix(path, strings.TrimSuffix(best.Route, "/"))
	if rest == "" {
		rest = "/"
	}
	return best, rest, true
}

func (e *Envoy) applyDefaults() {
	if e.ParseBody == nil {
		on := true
		e.ParseBody = &on
	}
	if e.RequireRouteName == nil {
		on := true
		e.RequireRouteName = &on
	}
	if e.JWTAuthn != nil && e.JWTAuthn.Namespace == "" {
		e.JWTAuthn.Namespace = DefaultJWTAuthnNamespace
	}
}

func (e *Envoy) validate(c *Config, bad func(key, format string, args ...any)) {
	for key, addr := range map[string]string{"envoy.grpc_listen": e.GRPCListen, "envoy.http_listen": e.HTTPListen,
		"envoy.ext_proc_listen": e.ExtProcListen} {
		if addr == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(addr); err != nil {
			bad(key, "%q is not host:port", addr)
		} else if port != "0" && (addr == c.Listen || addr == c.Admin) {
			bad(key, "%q is already the listen or admin address", addr)
		}
	}
	if e.GRPCListen != "" && e.GRPCListen == e.HTTPListen && !strings.HasSuffix(e.GRPCListen, ":0") {
		bad("envoy.http_listen", "%q is already envoy.grpc_listen", e.HTTPListen)
	}
	if a := e.ExtProcListen; a != "" && !strings.HasSuffix(a, ":0") && (a == e.GRPCListen || a == e.HTTPListen) {
		bad("envoy.ext_proc_listen", "%q is already an ext_authz listener", a)
	}
	if e.MaxResponseBytes < 0 {
		bad("envoy.max_response_bytes", "must be positive")
	} else if e.MaxResponseBytes > MaxResponseBytesLimit {
		bad("envoy.max_response_bytes", "%d exceeds %d, the most writ holds of one answer", e.MaxResponseBytes, MaxResponseBytesLimit)
	}
	if p := e.HTTPPathPrefix; p != "" && (!strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/")) {
		bad("envoy.http_path_prefix", "must start with / and not end with one, got %q", p)
	}
	if e.MaxRequestBytes < 0 {
		bad("envoy.max_request_bytes", "must be positive")
	} else if e.MaxRequestBytes > c.Limits.MaxBodyBytes && c.Limits.MaxBodyBytes > 0 {
		bad("envoy.max_request_bytes", "%d exceeds limits.max_body_bytes (%d)", e.MaxRequestBytes, c.Limits.MaxBodyBytes)
	}
	if j := e.JWTAuthn; j != nil {
		if j.Namespace == "" {
			bad("envoy.jwt_authn.namespace", "required")
		}
		if len(j.Issuers) == 0 {
			bad("envoy.jwt_authn.issuers", "required: the issuers whose claims Envoy verifies for writ")
		}
		for i, iss := range j.Issuers {
			if strings.TrimSpace(iss) == "" {
				bad(fmt.Sprintf("envoy.jwt_authn.issuers[%d]", i), "must not be empty")
			}
		}
	}
}

// checkGRPCListen checks agents[].grpc_listen: set exactly when the agent's
// protocol is served over gRPC (names.GRPC), and then host:port. An auto
// route is never gRPC: a gRPC call's path names a method, which says nothing
// of its protocol.
func checkGRPCListen(a Agent, key string, bad func(key, format string, args ...any)) {
	grpc := names.GRPC(a.Protocol)
	switch {
	case grpc && a.GRPCListen == "":
		bad(key+".grpc_listen", "required: protocol %s is served over gRPC, on a listener of the agent's own", a.Protocol)
	case !grpc && a.GRPCListen != "":
		bad(key+".grpc_listen", "only for a protocol served over gRPC (%s), not %q", orNone(names.AllGRPC()), a.Protocol)
	case grpc:
		if _, _, err := net.SplitHostPort(a.GRPCListen); err != nil {
			bad(key+".grpc_listen", "%q is not host:port", a.GRPCListen)
		}
	}
}

// orNone is a list of names for a message, "none is registered" when empty.
func orNone(list []string) string {
	if len(list) == 0 {
		return "none is registered"
	}
	return strings.Join(list, ", ")
}
