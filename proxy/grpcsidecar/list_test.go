package grpcsidecar_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2apb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
)

// listingAgent is a gRPC agent (0.3's a2a.v1 service) that answers each
// send with a new task and lists every task it has, whoever asks: an agent
// that leaves the scoping of listings to writ.
type listingAgent struct {
	a2apb.UnimplementedA2AServiceServer
	mu  sync.Mutex
	ids []string
}

func (a *listingAgent) SendMessage(context.Context, *a2apb.SendMessageRequest) (*a2apb.SendMessageResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := []string{"t-inv", "t-retail"}[len(a.ids)%2]
	a.ids = append(a.ids, id)
	return &a2apb.SendMessageResponse{Payload: &a2apb.SendMessageResponse_Task{Task: &a2apb.Task{Id: id, ContextId: "c-" + id,
		Status: &a2apb.TaskStatus{State: a2apb.TaskState_TASK_STATE_COMPLETED}}}}, nil
}

func (a *listingAgent) ListTasks(context.Context, *a2apb.ListTasksRequest) (*a2apb.ListTasksResponse, error) {
	out := &a2apb.ListTasksResponse{TotalSize: 3}
	for _, id := range []string{"t-inv", "t-retail", "t-never-seen"} {
		out.Tasks = append(out.Tasks, &a2apb.Task{Id: id, ContextId: "c-" + id, Status: &a2apb.TaskStatus{State: a2apb.TaskState_TASK_STATE_COMPLETED}})
	}
	return out, nil
}

// TestSecurityGRPCListShowsOwnTasksOnly: over the gRPC binding too, a
// ListTasks answer shows each caller its own tasks only, whatever the
// agent lists (A2A 1.0.1 §13.1: List Tasks MUST only return tasks visible
// to the authenticated client, even with no filter in the request).
//
// Threat: an agent that lists every task it holds shows one caller another
// caller's tasks, or tasks no caller of writ ever created. Defence: writ
// filters the gRPC listing (GRPCEdge.FilterTaskList) to the tasks the
// lifecycle store records for the caller before the answer is relayed.
func TestSecurityGRPCListShowsOwnTasksOnly(t *testing.T) {
	srv := grpc.NewServer()
	a2apb.RegisterA2AServiceServer(srv, &listingAgent{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	a := proxytest.SanctionsAgent("http://" + ln.Addr().String())
	a.Protocol, a.GRPCListen = "a2a-grpc", "127.0.0.1:0"
	h := proxytest.New(t, []config.Agent{a}, nil)
	conn, err := grpc.NewClient("passthrough:///"+h.Server.ListenerAddr("agents[0].grpc_listen"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := a2apb.NewA2AServiceClient(conn)
	as := func(who proxytest.Caller) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+h.Token(who))
	}
	send := &a2apb.SendMessageRequest{Request: &a2apb.Message{MessageId: "m-1", Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Part: &a2apb.Part_Text{Text: "Screen Acme"}}}}}
	for _, who := range []proxytest.Caller{proxytest.Investigator, proxytest.RetailBot} {
		if _, err := c.SendMessage(as(who), send); err != nil {
			t.Fatal(err)
		}
	}
	for who, want := range map[*proxytest.Caller][]string{&proxytest.Investigator: {"t-inv"}, &proxytest.RetailBot: {"t-retail"}} {
		l, err := c.ListTasks(as(*who), &a2apb.ListTasksRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tk := range l.GetTasks() {
			got = append(got, tk.GetId())
		}
		if !slices.Equal(got, want) || l.GetTotalSize() != int32(len(want)) {
			t.Errorf("%s lists %v (total %d), want %v", who.Agent, got, l.GetTotalSize(), want)
		}
	}
}

// TestSecurityGRPCExtendedCardNeedsAuthentication: the extended card over
// gRPC (0.3's GetAgentCard, which a2a-go answers with the authenticated
// card) is refused UNAUTHENTICATED to an anonymous caller before the agent
// is asked (A2A 1.0.1 §13.3: Get Extended Agent Card MUST require
// authentication).
//
// Threat: an anonymous caller reads the card an agent shows authenticated
// callers (its extra skills, its configuration). Defence: the shipped
// policy denies every operation of an unauthenticated caller, card.extended
// included, and the gRPC door answers the denial as a status.
func TestSecurityGRPCExtendedCardNeedsAuthentication(t *testing.T) {
	srv := grpc.NewServer()
	a2apb.RegisterA2AServiceServer(srv, &listingAgent{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	a := proxytest.SanctionsAgent("http://" + ln.Addr().String())
	a.Protocol, a.GRPCListen = "a2a-grpc", "127.0.0.1:0"
	h := proxytest.New(t, []config.Agent{a}, nil)
	conn, err := grpc.NewClient("passthrough:///"+h.Server.ListenerAddr("agents[0].grpc_listen"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_, err = a2apb.NewA2AServiceClient(conn).GetAgentCard(t.Context(), &a2apb.GetAgentCardRequest{})
	if code, r := reasons(err); code != codes.Unauthenticated || !slices.Contains(r, "UNAUTHENTICATED") {
		t.Errorf("anonymous extended card: %v %v", code, r)
	}
}
