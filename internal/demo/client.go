package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
)

// client is a real a2a-go client for writ's route, speaking for c.
func (st *Stage) client(ctx context.Context, route string, c Caller) (*a2aclient.Client, error) {
	return a2aclient.NewFromEndpoints(ctx,
		[]a2a.AgentInterface{{URL: st.url + "/" + route, Transport: a2a.TransportProtocolJSONRPC}},
		a2aclient.WithJSONRPCTransport(st.http), a2aclient.WithInterceptors(bearer(st.token(c))))
}

// send is one message/send through writ with a real a2a-go client.
func (st *Stage) send(ctx context.Context, route string, c Caller, p *a2a.MessageSendParams) (a2a.SendMessageResult, *rpcFault, error) {
	cl, err := st.client(ctx, route, c)
	if err != nil {
		return nil, nil, err
	}
	var res a2a.SendMessageResult
	f, err := rpcCall(ctx, func(ctx context.Context) error {
		res, err = cl.SendMessage(ctx, p)
		return err
	})
	return res, f, err
}

func newMessage(text string) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})}
}

// bearer puts the caller's token on every call the client makes.
type bearer string

func (b bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	req.Meta["Authorization"] = []string{"Bearer " + string(b)}
	return ctx, nil
}

func (bearer) After(context.Context, *a2aclient.Response) error { return nil }

// get does a plain GET through writ, for c (nil: anonymous).
func (st *Stage) get(ctx context.Context, path string, c *Caller) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, st.url+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if c != nil {
		req.Header.Set("Authorization", "Bearer "+st.token(*c))
	}
	resp, err := st.plain.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// rpcFault is writ's JSON-RPC error as it came over the wire.
type rpcFault struct {
	Status  int             // the HTTP status it came in
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	// Details are the google.rpc.ErrorInfo entries: error.data itself for A2A
	// 1.0, error.data.details for 0.3 (where data is an object).
	Details []errorInfo `json:"-"`
}

type errorInfo struct {
	Reason   string            `json:"reason"`
	Metadata map[string]string `json:"metadata"`
}

// Reason is the fault's own ErrorInfo reason (the first entry).
func (f *rpcFault) Reason() string {
	if len(f.Details) == 0 {
		return ""
	}
	return f.Details[0].Reason
}

// Reasons are every ErrorInfo reason, the fault's own first.
func (f *rpcFault) Reasons() []string {
	var out []string
	for _, e := range f.Details {
		out = append(out, e.Reason)
	}
	return out
}

// Denials are the policy's denials: the ErrorInfo entries after the first that
// carry a human reason (code: entry.Reason).
func (f *rpcFault) Denials() []errorInfo {
	var out []errorInfo
	for i, e := range f.Details {
		if i > 0 && e.Metadata["reason"] != "" {
			out = append(out, e)
		}
	}
	return out
}

// Codes are the denial codes, comma-separated.
func (f *rpcFault) Codes() string {
	var codes []string
	for _, e := range f.Denials() {
		codes = append(codes, e.Reason)
	}
	return strings.Join(codes, ", ")
}

// rpcTap is the a2a-go clients' transport. It keeps a copy of every JSON-RPC
// error answer for the call that asked for it (rpcCall): the a2a-go v0.3.3
// client reports an error that comes with a non-200 status (writ's denials are
// 401/403) as a bare "unexpected HTTP status", without reading the body.
type rpcTap struct{ base http.RoundTripper }

type tapKey struct{}

func (t rpcTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	sink, _ := req.Context().Value(tapKey{}).(*rpcFault)
	if err != nil || sink == nil {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return resp, nil // a stream, or not JSON-RPC
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return resp, nil //nolint:nilerr // the body is the client's to read; the tap only looks
	}
	var env struct {
		Error *rpcFault `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || env.Error == nil {
		return resp, nil //nolint:nilerr // not a JSON-RPC error: nothing to tap
	}
	f := env.Error
	f.Status = resp.StatusCode
	if json.Unmarshal(f.Data, &f.Details) != nil { // 1.0: a list; 0.3: an object
		var legacy struct {
			Details []errorInfo `json:"details"`
		}
		_ = json.Unmarshal(f.Data, &legacy)
		f.Details = legacy.Details
	}
	*sink = *f
	return resp, nil
}

// rpcCall runs one a2a-go client call and returns writ's JSON-RPC error answer,
// or nil when the call got none.
func rpcCall(ctx context.Context, call func(context.Context) error) (*rpcFault, error) {
	f := &rpcFault{}
	err := call(context.WithValue(ctx, tapKey{}, f))
	if f.Code == 0 {
		return nil, err
	}
	return f, err
}
