package acp

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/writ-authz/writ/task"
)

var fixtureCard = &task.AgentCard{
	Name:         "sanctions-screening",
	Description:  "Screens counterparties against sanctions and watch lists.",
	InputModes:   []string{"text/plain", "application/json"},
	OutputModes:  []string{"text/plain", "application/json"},
	Capabilities: task.Capabilities{Streaming: true},
	Skills: []task.Skill{{ID: "Screen a counterparty", Name: "Screen a counterparty",
		Description: "Screen a legal entity or individual against SDN, UN and local lists.",
		Tags:        []string{"sanctions", "compliance", "screening", "finance"}}},
	Provider:         &task.Provider{Organization: "Group Compliance", URL: "https://bank.example/compliance"},
	DocumentationURL: "https://bank.example/docs/sanctions",
}

func TestParseManifestFixture(t *testing.T) {
	_, _, body := readResponse(t, "agent_get")
	c, err := ParseManifest(body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, fixtureCard) {
		t.Fatalf("got  %+v\nwant %+v", c, fixtureCard)
	}
	// Every manifest of the listing parses; the bare one keeps only the required members.
	_, _, body = readResponse(t, "agents_list")
	var list struct {
		Agents []json.RawMessage `json:"agents"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Agents) != 2 {
		t.Fatal(err)
	}
	echo, err := ParseManifest(list.Agents[1])
	want := &task.AgentCard{Name: "echo", Description: "Echoes its input.", InputModes: []string{"*/*"},
		OutputModes: []string{"*/*"}, Capabilities: task.Capabilities{Streaming: true}}
	if err != nil || !reflect.DeepEqual(echo, want) {
		t.Fatalf("%+v, %v", echo, err)
	}
}

func TestManifestRoundTrip(t *testing.T) {
	b, err := RenderManifest(fixtureCard)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseManifest(b)
	if err != nil || !reflect.DeepEqual(c, fixtureCard) {
		t.Fatalf("card -> ACP -> card: %+v, %v via %s", c, err, b)
	}
	// Tags without capabilities: one skill named after the agent, and back.
	bare := []byte(`{"name":"kyc","description":"KYC refresh","input_content_types":["*/*"],"output_content_types":["*/*"],"metadata":{"tags":["kyc","compliance"]}}`)
	c, err = ParseManifest(bare)
	if err != nil || len(c.Skills) != 1 || c.Skills[0].ID != "kyc" || !reflect.DeepEqual(c.Skills[0].Tags, []string{"kyc", "compliance"}) {
		t.Fatalf("%+v, %v", c, err)
	}
	b, err = RenderManifest(c)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	_ = json.Unmarshal(b, &got)
	_ = json.Unmarshal(bare, &want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ACP -> card -> ACP: %s", b)
	}
	// A card with no modes still renders a valid manifest.
	b, err = RenderManifest(&task.AgentCard{Name: "x"})
	if err != nil || string(b) != `{"name":"x","description":"","input_content_types":["*/*"],"output_content_types":["*/*"]}` {
		t.Fatalf("%s, %v", b, err)
	}
}

func TestManifestErrors(t *testing.T) {
	for _, body := range []string{``, `[]`, `{}`, `{"name":7}`, `{"name":"x","metadata":{"tags":"a"}}`} {
		if c, err := ParseManifest([]byte(body)); err == nil {
			t.Errorf("%s: %+v, want an error", body, c)
		}
	}
	if _, err := RenderManifest(nil); err == nil {
		t.Error("RenderManifest(nil) succeeded")
	}
	if _, err := RenderManifest(&task.AgentCard{}); err == nil {
		t.Error("RenderManifest without a name succeeded")
	}
}
