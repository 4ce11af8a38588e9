package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// RewriteCardAnswer rewrites the card in an agent's answer to an extended-card
// request (agent/getAuthenticatedExtendedCard, GetExtendedAgentCard, GET
// /v1/card, GET /extendedAgentCard) with publish, signs it with sign (nil:
// unsigned), and renders it back in the answer's shape: the JSON-RPC
// result, or the HTTP+JSON body. An answer that is
// an error, or not a successful one, is returned unchanged; an answer that
// holds no card writ can read is an error (the caller must not get it
// verbatim).
func RewriteCardAnswer(req *task.Request, status int, body []byte, publish func(*task.AgentCard) *task.AgentCard, sign wire.Signer) ([]byte, error) {
	if status < 200 || status >= 300 {
		return body, nil
	}
	version := req.Protocol.Version
	render := func(card *task.AgentCard) ([]byte, error) {
		out, err := RenderCard(publish(card), version)
		if err != nil || sign == nil {
			return out, err
		}
		return SignCard(out, version, sign)
	}
	if req.Protocol.Binding != task.BindingJSONRPC {
		card, err := ParseCard(bytes.TrimSpace(body))
		if err != nil {
			return nil, fmt.Errorf("extended card: %w", err)
		}
		return render(card)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("extended card answer: %w", err)
	}
	if _, isErr := env["error"]; isErr {
		return body, nil
	}
	raw, ok := env["result"]
	if !ok {
		return nil, errors.New("extended card answer: no result")
	}
	card, err := ParseCard(raw)
	if err != nil {
		return nil, fmt.Errorf("extended card: %w", err)
	}
	out, err := render(card)
	if err != nil {
		return nil, err
	}
	env["result"] = out
	return json.Marshal(env)
}

// RewriteCardAnswer implements adapters.ExtendedCards.
func (Edge) RewriteCardAnswer(req *task.Request, status int, body []byte, publish func(*task.AgentCard) *task.AgentCard, sign wire.Signer) ([]byte, error) {
	return RewriteCardAnswer(req, status, body, publish, sign)
}
