package extproc

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	modev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/task"
)

// jsonAnswer is a whole answer (anything but an SSE stream): held until its
// last chunk, then observed through Plan.Answer, which may replace it (a
// listing filtered to the caller's tasks, the extended card rewritten, a
// refusal). Envoy sends it in one message when the response body mode is
// BUFFERED (writ asks for that); in STREAMED mode writ holds the chunks back
// itself (each is cleared) and sends the whole answer with the last one.
type jsonAnswer struct {
	st     *stream
	status int
	buf    []byte
	held   bool // earlier chunks were cleared
	done   bool
	over   int // answers refused as too large
}

func newJSONAnswer(st *stream, status int) *jsonAnswer { return &jsonAnswer{st: st, status: status} }

// whole reports whether one chunk is certainly the whole answer: Envoy runs
// BUFFERED by its own configuration (a body followed by trailers then comes
// without end_of_stream).
func (a *jsonAnswer) whole() bool {
	return a.st.responseBodyMode() == modev3.ProcessingMode_BUFFERED && !a.st.overrode
}

func (a *jsonAnswer) chunk(data []byte, eos bool) *extprocv3.CommonResponse {
	if a.done {
		return clearBody()
	}
	st, p := a.st, a.st.plan
	a.buf = append(a.buf, data...)
	if int64(len(a.buf)) > st.s.maxResp {
		// Refused as the sidecar refuses an answer over its bound; what
		// follows of it is dropped.
		a.done, a.over, a.buf = true, a.over+1, nil
		st.ev.UpstreamFailure = events.UpstreamBroken
		st.s.log.Warn("the agent's answer exceeds envoy.max_response_bytes; refused", "agent", st.out.Route, "limit", st.s.maxResp)
		return a.refuse(p.Fail(task.NewFault(task.KindUpstreamInvalid,
			fmt.Sprintf("the agent's answer exceeds %d bytes", st.s.maxResp))))
	}
	if !eos && !a.whole() {
		a.held = true
		return clearBody()
	}
	a.done = true
	body, refused := p.Answer(st.ctx, a.status, a.buf)
	a.buf = nil
	if refused != nil {
		return a.refuse(*refused)
	}
	if !a.held && bytes.Equal(body, data) {
		return nil // passed on as the agent sent it
	}
	// writ's rewrite of the agent's JSON (a filtered listing, the extended
	// card): what described the agent's bytes no longer does.
	return &extprocv3.CommonResponse{
		HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: contentLength(len(body)), RemoveHeaders: bytesHeaders},
		BodyMutation:   &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: body}}}
}

// refuse replaces the answer by writ's refusal r, and reports its status (in
// STREAMED mode the caller got the agent's status with r's body).
func (a *jsonAnswer) refuse(r wire.Rendered) *extprocv3.CommonResponse {
	c := replace(r, a.st.answerHeaders)
	a.st.ev.Status = refusalStatus(r.Status)
	return c
}

// end: trailers followed the last chunk. An answer writ held back chunk by
// chunk (STREAMED) cannot be sent any more: trailers carry no body.
func (a *jsonAnswer) end() {
	if !a.done && a.held {
		a.st.s.log.Warn("an answer with trailers in STREAMED mode was held back and is lost; run ext_proc with response_body_mode BUFFERED or allow_mode_override",
			"agent", a.st.out.Route)
		a.st.ev.UpstreamFailure = events.UpstreamBroken
	}
	a.done = true
}

func (a *jsonAnswer) close()       {}
func (a *jsonAnswer) invalid() int { return a.over }

// sseAnswer relays an SSE stream through the plan's relay (Plan.Chunks):
// each chunk Envoy shows is fed to the relay, and what the relay passes on
// for it — the whole events completed so far, exactly as the sidecar writes
// them — replaces the chunk.
type sseAnswer struct {
	st *stream
	c  *proxy.Chunks
}

func newSSEAnswer(st *stream) *sseAnswer {
	return &sseAnswer{st: st, c: st.plan.Chunks(st.ctx)}
}

func (a *sseAnswer) chunk(data []byte, eos bool) *extprocv3.CommonResponse {
	out := a.c.Feed(data, eos)
	if eos {
		a.record()
	}
	switch {
	case bytes.Equal(out, data):
		return nil
	case len(out) == 0:
		return clearBody()
	}
	return &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: out}}}
}

// end: trailers ended the stream; an event the agent left unfinished is
// dropped (a trailers message carries no body).
func (a *sseAnswer) end() {
	if out := a.c.Feed(nil, true); len(out) > 0 {
		a.st.s.log.Info("the end of a stream was cut by trailers", "agent", a.st.out.Route, "bytes", len(out))
	}
	a.record()
}

// record notes how the relay ended (a stream that broke off is logged where
// it broke).
func (a *sseAnswer) record() {
	if failure := a.c.Failure(); failure != "" {
		a.st.ev.UpstreamFailure = failure
	}
}

func (a *sseAnswer) close()       { a.c.Abort() }
func (a *sseAnswer) invalid() int { return 0 }

// blindAnswer is the body of an answer whose headers Envoy did not show
// writ: nothing of it is observed. An answer writ must rewrite (a listing, the
// extended card) is withheld: its chunks are cleared and a protocol-shaped
// refusal takes the place of the last.
type blindAnswer struct{ st *stream }

func (a *blindAnswer) chunk(_ []byte, eos bool) *extprocv3.CommonResponse {
	if !needsAnswer(a.st.out.Operation) {
		return nil
	}
	if !eos {
		return clearBody()
	}
	r := a.st.plan.Fail(task.NewFault(task.KindUnavailable, "writ cannot read this answer behind this Envoy (ext_proc response_header_mode)"))
	// writ never saw the answer's headers: every representation header is
	// removed (Envoy applies this while it holds them: BUFFERED).
	return replace(r, representationHeaders)
}

func (a *blindAnswer) end()         {}
func (a *blindAnswer) close()       {}
func (a *blindAnswer) invalid() int { return 0 }

// replace is writ's refusal in place of the agent's answer: status, headers
// and body. The refusals Plan.Answer makes are the agent's fault (an answer
// too large or unreadable: 502) or the store's (503); as for every refusal
// in Envoy mode, a JSON-RPC error the sidecar sends on 200 gets the status of
// its fault, here 502. Every header of the answer it replaces (drop: the
// names Envoy showed writ) is removed, as the sidecar sends a refusal with
// its own headers only: a Content-Encoding, Content-Length, ETag or digest
// of the agent's body would misdescribe writ's (a gzip coding left on the
// refusal makes it unreadable). The status and headers apply while Envoy
// still holds the answer's headers (BUFFERED, or the headers phase); in
// STREAMED mode they are gone downstream and only the body is replaced.
func replace(r wire.Rendered, drop []string) *extprocv3.CommonResponse {
	r.Status = refusalStatus(r.Status)
	mut := &extprocv3.HeaderMutation{SetHeaders: contentLength(len(r.Body))}
	mut.SetHeaders = append(mut.SetHeaders, setHeader(":status", strconv.Itoa(r.Status)))
	if r.ContentType != "" {
		mut.SetHeaders = append(mut.SetHeaders, setHeader("content-type", r.ContentType))
	}
	for _, k := range slices.Sorted(maps.Keys(r.Header)) {
		mut.SetHeaders = append(mut.SetHeaders, setHeader(k, r.Header.Get(k)))
	}
	set := map[string]bool{}
	for _, h := range mut.SetHeaders {
		set[h.GetHeader().GetKey()] = true
	}
	for _, k := range drop {
		if k = strings.ToLower(k); !set[k] && !strings.HasPrefix(k, ":") {
			mut.RemoveHeaders = append(mut.RemoveHeaders, k)
		}
	}
	return &extprocv3.CommonResponse{HeaderMutation: mut,
		BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: r.Body}}}
}

// bytesHeaders describe the exact bytes of a body (its coding, range,
// digests, entity tag): removed when writ rewrites the body.
var bytesHeaders = []string{"content-encoding", "content-range", "content-md5", "digest", "content-digest",
	"repr-digest", "etag"}

// representationHeaders are every header that describes a body, removed
// from an answer writ replaces without having seen its headers.
var representationHeaders = append([]string{"content-type", "content-length", "content-language",
	"content-location", "content-disposition", "last-modified"}, bytesHeaders...)

// refusalStatus is the status of a refusal in place of an answer: never a 2xx.
func refusalStatus(status int) int {
	if status < 300 {
		return http.StatusBadGateway
	}
	return status
}
