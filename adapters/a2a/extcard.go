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
// /v1/card, GET /extendedAgentCard): checks it with rw.Verify (and reads
// the content it returns), rewrites it with rw.Publish, signs it with
// rw.Sign, and renders it back in the answer's shape: the JSON-RPC result,
// or the HTTP+JSON body. An answer that is an error, or not a successful
// one, is returned unchanged; an answer that holds no card writ can read, or
// one its check refuses, is an error (the caller must not get it verbatim).
func RewriteCardAnswer(req *task.Request, status int, body []byte, rw wire.CardRewrite) ([]byte, error) {
	if status < 200 || status >= 300 {
		return body, nil
	}
	version := req.Protocol.Version
	render := func(raw []byte) ([]byte, error) {
		if rw.Verify != nil {
			var err error
			if raw, err = rw.Verify(raw); err != nil {
				return nil, fmt.Errorf("extended card: %w", err)
			}
		}
		card, err := ParseCard(raw)
		if err != nil {
			return nil, fmt.Errorf("extended card: %w", err)
		}
		out, err := RenderCard(rw.Publish(card), version)
		if err != nil || rw.Sign == nil {
			return out, err
		}
		return SignCard(out, version, rw.Sign)
	}
	if req.Protocol.Binding != task.BindingJSONRPC {
		return render(bytes.TrimSpace(body))
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
	out, err := render(raw)
	if err != nil {
		return nil, err
	}
	env["result"] = out
	return json.Marshal(env)
}

// RewriteCardAnswer implements adapters.ExtendedCards.
func (Edge) RewriteCardAnswer(req *task.Request, status int, body []byte, rw wire.CardRewrite) ([]byte, error) {
	return RewriteCardAnswer(req, status, body, rw)
}
