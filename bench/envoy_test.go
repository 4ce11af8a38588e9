package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	modev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/writ-authz/writ/bench/loadgen"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/proxy/writheader"
)

// envoyDoors starts writ with its ext_authz and ext_proc gRPC servers in
// process on loopback (startWrit), and returns their addresses.
func envoyDoors(t *testing.T) (authzAddr, procAddr string) {
	t.Helper()
	s := startWrit(t, "http://127.0.0.1:9", 10000,
		"envoy: {grpc_listen: 127.0.0.1:0, ext_proc_listen: 127.0.0.1:0, max_request_bytes: 1048576}\n", discard{})
	return s.ListenerAddr("envoy.grpc_listen"), s.ListenerAddr("envoy.ext_proc_listen")
}

// discard takes push notifications and delivers none: with it writ keeps
// push configs itself, as writ serve does by default.
type discard struct{}

func (discard) Enqueue(push.Notification) error { return nil }

// benchCheck is request_allow.json as a CheckRequest; deny swaps its callback
// for one no allow-list names (CALLBACK_NOT_ALLOWED).
func benchCheck(t *testing.T, deny bool) *authv3.CheckRequest {
	t.Helper()
	raw, err := os.ReadFile("request_allow.json")
	if err != nil {
		t.Fatal(err)
	}
	var cr authv3.CheckRequest
	if err := protojson.Unmarshal(raw, &cr); err != nil {
		t.Fatal(err)
	}
	if deny {
		h := cr.GetAttributes().GetRequest().GetHttp()
		h.Body = strings.Replace(h.GetBody(), "https://agents.bank.ae/cb", "https://evil.example/cb", 1)
	}
	return &cr
}

// TestLoadDoors: bench/load's client, through each door and phase, gets the
// bench request allowed by writ's real servers (and the refused variant
// refused), so make bench-envoy measures the allowed delegation it reports.
func TestLoadDoors(t *testing.T) {
	authzAddr, procAddr := envoyDoors(t)
	doors := []struct {
		name string
		opt  loadgen.Options
	}{
		{"ext_authz", loadgen.Options{Addr: authzAddr, Door: loadgen.ExtAuthz}},
		{"ext_proc request", loadgen.Options{Addr: procAddr, Door: loadgen.ExtProc, Phases: loadgen.PhaseRequest}},
		{"ext_proc request+response", loadgen.Options{Addr: procAddr, Door: loadgen.ExtProc, Phases: loadgen.PhaseBoth}},
	}
	for _, d := range doors {
		for _, deny := range []bool{false, true} {
			b, err := proto.Marshal(benchCheck(t, deny))
			if err != nil {
				t.Fatal(err)
			}
			opt := d.opt
			opt.Workers, opt.Total = 4, 40
			res, err := loadgen.Run([][]byte{b}, opt)
			if err != nil {
				t.Fatalf("%s: %v", d.name, err)
			}
			want := loadgen.Result{Count: 40, Allowed: 40}
			if deny {
				want = loadgen.Result{Count: 40, Denied: 40}
			}
			if res.Count != want.Count || res.Allowed != want.Allowed || res.Denied != want.Denied || res.Errors != 0 {
				t.Errorf("%s (deny %v): %d calls, %d allowed, %d denied, %d errors (%s); want %d allowed, %d denied",
					d.name, deny, res.Count, res.Allowed, res.Denied, res.Errors, res.FirstErr, want.Allowed, want.Denied)
			}
		}
	}
}

// TestExtProcStreamAnswers plays the load client's stream message by message
// and checks what writ answers each: the request forwarded with Writ-Caller
// and the push config stripped, BUFFERED asked for the JSON answer, the
// answer passed on.
func TestExtProcStreamAnswers(t *testing.T) {
	_, procAddr := envoyDoors(t)
	cr := benchCheck(t, false)
	msgs, err := loadgen.Stream(cr, loadgen.PhaseBoth)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want request headers, request body, response headers, response body", len(msgs))
	}
	conn, err := grpc.NewClient(procAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := extprocv3.NewExternalProcessorClient(conn).Process(loadgen.StreamContext(context.Background(), cr))
	if err != nil {
		t.Fatal(err)
	}
	var answers []*extprocv3.ProcessingResponse
	for i, m := range msgs {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ir := r.GetImmediateResponse(); ir != nil {
			t.Fatalf("message %d answered by writ (%v): %s", i, ir.GetStatus(), ir.GetBody())
		}
		answers = append(answers, r)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last message: %v, want the end of the stream", err)
	}
	if answers[0].GetRequestHeaders() == nil {
		t.Errorf("request headers answered with %T", answers[0].GetResponse())
	}
	body := answers[1].GetRequestBody().GetResponse()
	if body == nil {
		t.Fatalf("request body answered with %T", answers[1].GetResponse())
	}
	caller := false
	for _, h := range body.GetHeaderMutation().GetSetHeaders() {
		caller = caller || strings.EqualFold(h.GetHeader().GetKey(), writheader.Caller)
	}
	if !caller {
		t.Errorf("the forwarded request has no %s: %v", writheader.Caller, body.GetHeaderMutation())
	}
	if fwd := body.GetBodyMutation().GetBody(); fwd == nil || bytes.Contains(fwd, []byte("s3cret")) {
		t.Errorf("the forwarded body keeps the push config writ holds: %q", fwd)
	}
	if got := answers[2].GetModeOverride().GetResponseBodyMode(); got != modev3.ProcessingMode_BUFFERED {
		t.Errorf("JSON answer: mode override %v, want BUFFERED (the load client sends it whole)", got)
	}
	if answers[3].GetResponseBody() == nil {
		t.Errorf("response body answered with %T", answers[3].GetResponse())
	}
}
