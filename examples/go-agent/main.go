// Command go-agent is a minimal A2A 0.3 agent on a2a-go v0.3.3, to put writ
// in front of (docs/walkthrough.md). One skill, "echo": every text message
// becomes a task that completes with the text said back.
//
//	PORT=9000 go run ./examples/go-agent
//
// a2a-go v0.3.3 speaks A2A 0.3 only (message/send, no A2A-Version header).
// It takes push configs (the SDK's in-memory store and HTTP sender); behind
// writ it never sees one: writ decides each, keeps it and delivers the
// notifications itself (docs/push.md).
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/a2asrv/push"
)

// echo answers each message: a task, completed with the reply as its status
// message.
type echo struct{}

// Execute opens the task (a new one) and completes it with the text said back.
func (echo) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
	}
	var said []string
	for _, p := range rc.Message.Parts {
		if t, ok := p.(a2a.TextPart); ok {
			said = append(said, t.Text)
		}
	}
	reply := a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: "echo: " + strings.Join(said, " ")})
	done := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, reply)
	done.Final = true
	return q.Write(ctx, done)
}

// Cancel moves the task to canceled.
func (echo) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "9000"
	}
	addr := "127.0.0.1:" + port
	card := &a2a.AgentCard{
		Name:               "echo-agent",
		Description:        "Says back what it is told.",
		URL:                "http://" + addr + "/",
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    "0.3.0",
		Version:            "1.0.0",
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{
			ID: "echo", Name: "Echo", Description: "Answers a text message with the same text.",
			Tags: []string{"example"}, Examples: []string{"hello"},
		}},
	}
	handler := a2asrv.NewHandler(echo{}, a2asrv.WithPushNotifications(push.NewInMemoryStore(),
		push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 5 * time.Second})))

	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/", a2asrv.NewJSONRPCHandler(handler))
	fmt.Printf("echo-agent listening on http://%s/\n", addr)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
