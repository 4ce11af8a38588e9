package a2a

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-authz/writ/task"
)

// TestCapturedCards parses the cards the real SDKs serve (1.0 from the JS SDK, 0.3
// from a2a-go) into the same internal card, and renders each back in both shapes.
func TestCapturedCards(t *testing.T) {
	cards := map[string]*task.AgentCard{}
	for _, v := range []string{"v0.3", "v1.0"} {
		_, body := readResponse(t, filepath.Join(fixtures, v, "card.response.http"))
		c, err := ParseCard(body)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		cards[v] = c
		if c.Name != "Sanctions Screening Agent" || c.Version != "1.0.0" {
			t.Errorf("%s: name/version %q %q", v, c.Name, c.Version)
		}
		if !c.Capabilities.Streaming || !c.Capabilities.PushNotifications || !c.Capabilities.ExtendedCard {
			t.Errorf("%s: capabilities %+v", v, c.Capabilities)
		}
		if len(c.Capabilities.Extensions) != 1 || c.Capabilities.Extensions[0].URI != "urn:writ:ext:classification:v1" {
			t.Errorf("%s: extensions %+v", v, c.Capabilities.Extensions)
		}
		if len(c.SecuritySchemes) != 1 || !reflect.DeepEqual(c.SecuritySchemes[0], task.SecurityScheme{Name: "bearer", Kind: task.SchemeHTTP,
			Description: "Bank-issued JWT", HTTPScheme: "Bearer", BearerFormat: "JWT"}) {
			t.Errorf("%s: schemes %+v", v, c.SecuritySchemes)
		}
		if len(c.Skills) != 1 || c.Skills[0].ID != "sanctions-screening" || !reflect.DeepEqual(c.Skills[0].Tags, []string{"kyc", "sanctions"}) {
			t.Errorf("%s: skills %+v", v, c.Skills)
		}
		if len(c.Interfaces) == 0 || c.Interfaces[0].URL != "http://agent.test/" || c.Interfaces[0].Binding != "JSONRPC" {
			t.Errorf("%s: interfaces %+v", v, c.Interfaces)
		}
		if c.Provider == nil || c.Provider.Organization != "Writ Test Bank" {
			t.Errorf("%s: provider %+v", v, c.Provider)
		}
	}
	if len(cards["v1.0"].Interfaces) != 2 || cards["v1.0"].Interfaces[1].Binding != "HTTP+JSON" {
		t.Errorf("1.0 interfaces %+v", cards["v1.0"].Interfaces)
	}
	// Render in each version and parse back: nothing the card model holds is lost.
	for v, c := range cards {
		for _, target := range []string{V03, V10} {
			out, err := RenderCard(c, target)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseCard(out)
			if err != nil {
				t.Fatalf("%s→%s: %v\n%s", v, target, err, out)
			}
			if target == V10 && !strings.Contains(string(out), `"supportedInterfaces"`) ||
				target == V03 && !strings.Contains(string(out), `"preferredTransport"`) {
				t.Errorf("%s→%s: wrong shape %s", v, target, out)
			}
			back.ProtocolVersion, back.Security = c.ProtocolVersion, c.Security
			for i := range back.Interfaces {
				if i < len(c.Interfaces) {
					back.Interfaces[i].ProtocolVersion = c.Interfaces[i].ProtocolVersion
				}
			}
			if !reflect.DeepEqual(back, c) {
				t.Errorf("%s→%s→internal differs:\n got %+v\nwant %+v", v, target, back, c)
			}
		}
	}
}

func TestCardErrors(t *testing.T) {
	for name, body := range map[string]string{
		"not json":       `{"name":`,
		"no name":        `{"url":"https://a"}`,
		"no interfaces":  `{"name":"x"}`,
		"bad scheme 0.3": `{"name":"x","url":"https://a","securitySchemes":{"s":{"type":"carrier-pigeon"}}}`,
		"bad scheme 1.0": `{"name":"x","supportedInterfaces":[{"url":"https://a","protocolBinding":"JSONRPC"}],"securitySchemes":{"s":{}}}`,
	} {
		if _, err := ParseCard([]byte(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
