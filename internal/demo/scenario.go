package demo

import (
	"context"

	"github.com/a2aproject/a2a-go/a2a"

	a2aadapter "github.com/writ-authz/writ/adapters/a2a"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/task"
)

// Step is one part of the scenario: its heading and what it plays.
type Step struct {
	Title string
	Run   Runner
}

// Runner plays a step against a running Stage: Discovery, Admission,
// Streaming, InputRequired, Cancellation, Push, Core, Card. Their fields are
// the step's cases and expectations.
type Runner interface {
	run(ctx context.Context, st *Stage, r *recorder)
}

const screenRequest = "Screen the beneficiary of PMT-771"

var (
	sanctionsAgents = []string{"sanctions-clarifier", "sanctions-screening-agent", "sanctions-slow"}
	marketingHidden = "handles up to 'internal' and accepts only apikey"
)

// Scenario is the seed's worked example: eight steps, each with what it sends
// through writ and what writ must answer.
var Scenario = []Step{
	{"1. DISCOVERY — WHO CAN DO THIS?", Discovery{Views: []DirectoryView{
		{Who: "payments-investigator (wholesale, restricted)", Caller: Investigator, Tags: "sanctions", Detail: true,
			Want: sanctionsAgents, Hidden: map[string]string{
				"kyc-refresh-agent": "serves tenant 'retail' only", "marketing-copy-agent": marketingHidden}},
		{Who: "kyc-ops-bot (retail, confidential)", Caller: RetailBot, Tags: "sanctions",
			Want: sanctionsAgents, Hidden: map[string]string{
				"kyc-refresh-agent": "has no skill tagged 'sanctions'", "marketing-copy-agent": marketingHidden}},
		{Who: "payments-investigator, no tag filter", Caller: Investigator, Want: sanctionsAgents},
		{Who: "kyc-ops-bot, no tag filter", Caller: RetailBot,
			Want: []string{"kyc-refresh-agent", "sanctions-clarifier", "sanctions-screening-agent", "sanctions-slow"}},
	}}},

	{"2. DELEGATION ADMISSION — WHAT A2A DOES NOT SPECIFY", Admission{Caller: Investigator, Text: screenRequest,
		Cases: []AdmissionCase{
			{Label: "sanctions-screening-agent", Route: "sanctions", Caller: Investigator},
			{Label: "kyc-refresh-agent", Route: "kyc", Caller: Investigator,
				Want: []string{"CLASSIFICATION_EXCEEDED", "TENANT_NOT_PERMITTED"}},
			{Label: "marketing-copy-agent", Route: "marketing", Caller: Investigator,
				Want: []string{"CLASSIFICATION_EXCEEDED", "NO_ACCEPTABLE_AUTH"}},
			{Label: "chain depth 4", Route: "sanctions", Caller: DeepInvestigator, Want: []string{"DEPTH_EXCEEDED"}},
			{Label: "cycle", Route: "sanctions", Caller: CyclicInvestigator, Want: []string{"CYCLE_DETECTED"}},
		},
		Unreached: []string{"kyc", "marketing"}}},

	{"3. A STREAMED DELEGATION", Streaming{Route: "sanctions", Caller: Investigator, Text: screenRequest,
		Data: map[string]any{"beneficiary": "Acme Trading FZE"},
		WantEvents: []string{"task submitted", "status working", "artifact " + seedagents.ArtifactName,
			"status completed"},
		WantFinal: seedagents.ScreeningDone,
		WantParts: []string{
			"text: Acme Trading FZE: 1 possible match (score 0.83) against SDN list",
			`data: {"list":"SDN","matches":1,"recommendation":"manual_review","top_score":0.83}`}}},

	{"4. INPUT-REQUIRED: A TASK THAT OUTLIVES A REQUEST", InputRequired{Route: "clarifier", Caller: Investigator,
		First: "Screen this entity", Reply: "UAE and UN lists",
		WantQuestion: seedagents.ClarifyQuestion, WantDone: seedagents.ClarifyDone}},

	{"5. CANCELLATION AND TERMINAL STATES", Cancellation{Route: "slow", Caller: Investigator,
		Text: "Screen something slow", WantCanceled: seedagents.CancelledText,
		Repeat:       Fault{Code: a2aadapter.CodeTaskNotCancelable, Reason: "TASK_NOT_CANCELABLE", SDK: a2a.ErrTaskNotCancelable},
		AgentCancels: 1,
		FollowUp:     "One more thing",
		Terminal:     Fault{Code: a2aadapter.CodeUnsupportedOperation, Reason: "TASK_TERMINAL", SDK: a2a.ErrUnsupportedOperation}}},

	{"6. PUSH NOTIFICATIONS — AND THE SSRF THEY INVITE", Push{Route: "sanctions", Caller: Investigator, Text: "Screen slowly",
		Refused: []PushCase{
			{Label: "https://evil.example/hook (token)",
				Config: a2a.PushConfig{URL: "https://evil.example/hook", Token: "s3cret"}, Want: "CALLBACK_NOT_ALLOWED"},
			{Label: "https://agents.bank.ae/cb (no token)",
				Config: a2a.PushConfig{URL: "https://agents.bank.ae/cb"}, Want: "CALLBACK_UNAUTHENTICATED"},
		},
		Delivered: PushDelivery{Route: "clarifier", Token: "demo-token", First: "Screen this entity",
			Reply: "UAE and UN lists", WantStates: []string{"input-required", "completed"}}}},

	{"7. PROTOCOL-AGNOSTIC CORE: A2A -> INTERNAL -> ACP -> INTERNAL", Core{Route: "sanctions", Caller: Investigator,
		WantState: task.Succeeded, WantRun: "completed", WantParts: 2}},

	{"8. THE AGENT CARD ON THE WIRE", Card{Route: "sanctions", Caller: Investigator,
		Show:           []string{"protocolVersion", "name", "url", "version", "capabilities"},
		WantName:       "sanctions-screening-agent",
		WantSchemes:    []string{"bearer (http Bearer JWT)"},
		PlatformKeys:   []string{"owner", "tenants", "max_data_classification", "maxDataClassification"},
		PlatformValues: []string{"group-compliance", "wholesale"},
		WantAnonymous:  404}},
}

// Discovery asks writ's directory which agents each caller may see.
type Discovery struct{ Views []DirectoryView }

// DirectoryView is one caller's look at the directory.
type DirectoryView struct {
	Who    string // the caller as the console names it
	Caller Caller
	Tags   string   // the ?tags= filter ("" for none)
	Want   []string // the agents listed, in order
	// Hidden says why an agent is not listed (shown for those not listed; nil
	// shows nothing).
	Hidden map[string]string
	// Detail lists each agent with its version, skills and streaming.
	Detail bool
}

// Admission sends one message per case and wants writ's verdict.
type Admission struct {
	Caller Caller // the caller the step introduces
	Text   string // what every case sends
	Cases  []AdmissionCase
	// Unreached are the routes whose agents must never see a message/send.
	Unreached []string
}

// AdmissionCase is one message/send and the denial codes it must get, in
// order (none: it is allowed and the task completes).
type AdmissionCase struct {
	Label  string
	Route  string
	Caller Caller
	Want   []string
}

// Streaming streams one delegation (message/stream) through writ.
type Streaming struct {
	Route  string
	Caller Caller
	Text   string
	Data   map[string]any // a data part beside the text
	// WantEvents are the stream's events in order: "task <state>",
	// "status <state>", "artifact <name>" or "message".
	WantEvents []string
	WantFinal  string   // the final status message
	WantParts  []string // the artifact's parts as shown ("text: …", "data: …")
}

// InputRequired sends a message the agent answers with a question, then the
// reply on the same task.
type InputRequired struct {
	Route        string
	Caller       Caller
	First, Reply string
	WantQuestion string // the input-required status message
	WantDone     string // the completed status message
}

// Cancellation starts a long task, cancels it, then cancels it again and
// sends it a message: writ answers those two from its lifecycle store.
type Cancellation struct {
	Route        string
	Caller       Caller
	Text         string
	WantCanceled string // the canceled status message
	Repeat       Fault  // what the second cancel gets
	AgentCancels int    // how many cancels reach the agent
	FollowUp     string // a message to the canceled task
	Terminal     Fault  // what it gets
}

// Fault is an expected JSON-RPC error: its code, a reason among its ErrorInfo
// details, and the error a2a-go must type it as.
type Fault struct {
	Code   int
	Reason string
	SDK    error
}

// Push sets push configs: refused callbacks, and one writ delivers to.
type Push struct {
	Route     string // where the refused configs are sent
	Caller    Caller
	Text      string
	Refused   []PushCase
	Delivered PushDelivery
}

// PushCase is a push config and the denial code it must get.
type PushCase struct {
	Label  string
	Config a2a.PushConfig
	Want   string
}

// PushDelivery sets the demo receiver as the callback of a task that asks for
// input and then completes; writ must deliver each state with the token.
type PushDelivery struct {
	Route        string
	Token        string
	First, Reply string
	WantStates   []string
}

// Core reads the streamed task back through writ and round-trips it through
// the internal model, ACP and A2A 1.0.
type Core struct {
	Route     string
	Caller    Caller
	WantState task.State // the internal state
	WantRun   string     // the ACP run's status
	WantParts int        // the ACP run's output parts
}

// Card fetches an agent's card through writ.
type Card struct {
	Route       string
	Caller      Caller
	Show        []string // the card fields shown
	WantName    string
	WantSchemes []string // the security schemes, as shown
	// PlatformKeys and PlatformValues are writ's config metadata that must not
	// appear on the published card.
	PlatformKeys, PlatformValues []string
	WantAnonymous                int // the HTTP status of the same GET without a token
}
