// Package loadgen drives writ's Envoy front doors the way Envoy and ghz do,
// for bench/load and its tests: N workers on one HTTP/2 connection send
// pre-built requests, either as fast as the server answers or at a fixed
// rate, and one Result summarizes the run (throughput, latency percentiles,
// allowed, denied and failed calls).
//
// Two doors: ext_authz, one Check call per request (a marshaled CheckRequest
// sent as is), and ext_proc, one Process stream per request, carrying the
// messages Envoy's ext_proc filter sends for the request a CheckRequest
// describes (Stream).
//
// Latency is measured from the moment a worker sends a call (or opens a
// stream) until its answer (the end of the stream) arrives, as ghz measures
// it; at a fixed rate each worker waits for its slot in the schedule first, so
// a server that falls behind shows as a lower achieved rate, not as a longer
// queue inside the client.
package loadgen

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// The doors Run drives.
const (
	// ExtAuthz is envoy.service.auth.v3.Authorization/Check.
	ExtAuthz = "ext_authz"
	// ExtProc is envoy.service.ext_proc.v3.ExternalProcessor/Process.
	ExtProc = "ext_proc"
)

// Options say where and how Run sends.
type Options struct {
	// Addr is the door's gRPC address.
	Addr string
	// Door is ExtAuthz (the default) or ExtProc.
	Door string
	// Phases are the ext_proc phases each stream carries: PhaseRequest (the
	// default) or PhaseBoth.
	Phases string
	// Workers is the number of concurrent callers (default 16).
	Workers int
	// Duration is how long to send (ignored with Total).
	Duration time.Duration
	// RPS is a fixed total rate; 0 sends as fast as answered.
	RPS float64
	// Total, when set, sends exactly this many calls and stops.
	Total int
	// Offset is the index of the first request to send.
	Offset int
}

// Result is what one run measured.
type Result struct {
	Workers   int     `json:"workers"`
	TargetRPS float64 `json:"target_rps"`
	Count     int     `json:"count"`
	Errors    int     `json:"errors"`
	Allowed   int     `json:"allowed"`
	Denied    int     `json:"denied"`
	Seconds   float64 `json:"seconds"`
	RPS       float64 `json:"rps"`
	P50ms     float64 `json:"p50_ms"`
	P90ms     float64 `json:"p90_ms"`
	P99ms     float64 `json:"p99_ms"`
	P999ms    float64 `json:"p999_ms"`
	MaxMs     float64 `json:"max_ms"`
	FirstErr  string  `json:"first_error,omitempty"`
}

// raw is an already marshaled message; codec passes it through untouched.
type raw []byte

type codec struct{}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) ([]byte, error) {
	if r, ok := v.(*raw); ok {
		return *r, nil
	}
	return proto.Marshal(v.(proto.Message))
}

func (codec) Unmarshal(data []byte, v any) error { return proto.Unmarshal(data, v.(proto.Message)) }

// ReadRequests reads a file of length-prefixed (uvarint) marshaled
// CheckRequests, as bench/report writes them.
func ReadRequests(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var out [][]byte
	for {
		n, err := binary.ReadUvarint(r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no requests", path)
	}
	return out, nil
}

// call sends request i and says whether it was allowed.
type call func(i int) (allowed bool, err error)

// door makes each worker's call (a worker's call keeps its own buffers).
type door interface{ worker() call }

// newDoor prepares the requests for opt.Door.
func newDoor(conn *grpc.ClientConn, reqs [][]byte, opt Options) (door, error) {
	switch opt.Door {
	case "", ExtAuthz:
		d := &authzDoor{conn: conn, reqs: make([]raw, len(reqs))}
		for i, r := range reqs {
			d.reqs[i] = r
		}
		return d, nil
	case ExtProc:
		return newProcDoor(conn, reqs, opt.Phases)
	}
	return nil, fmt.Errorf("door %q: want %s or %s", opt.Door, ExtAuthz, ExtProc)
}

const checkMethod = "/envoy.service.auth.v3.Authorization/Check"

// authzDoor sends each CheckRequest as one Check call.
type authzDoor struct {
	conn *grpc.ClientConn
	reqs []raw
}

func (d *authzDoor) worker() call {
	var resp authv3.CheckResponse
	return func(i int) (bool, error) {
		if err := d.conn.Invoke(context.Background(), checkMethod, &d.reqs[i%len(d.reqs)], &resp); err != nil {
			return false, err
		}
		return resp.GetStatus().GetCode() == 0, nil
	}
}

// Run sends reqs (marshaled CheckRequests) through opt.Door at opt.Addr.
func Run(reqs [][]byte, opt Options) (Result, error) {
	if len(reqs) == 0 {
		return Result{}, errors.New("no requests")
	}
	if opt.Workers <= 0 {
		opt.Workers = 16
	}
	conn, err := grpc.NewClient(opt.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{})))
	if err != nil {
		return Result{}, err
	}
	defer conn.Close()
	d, err := newDoor(conn, reqs, opt)
	if err != nil {
		return Result{}, err
	}
	// One call first: the connection is up before the clock starts.
	if _, err := d.worker()(opt.Offset); err != nil {
		return Result{}, fmt.Errorf("first call: %w", err)
	}
	return drive(d, opt), nil
}

// drive runs the workers and summarizes what they measured.
func drive(d door, opt Options) Result {
	var (
		next    atomic.Int64
		stop    atomic.Bool
		mu      sync.Mutex
		lats    []time.Duration
		res     = Result{Workers: opt.Workers, TargetRPS: opt.RPS}
		wg      sync.WaitGroup
		start   = time.Now()
		limit   = int64(opt.Total)
		perCall = time.Duration(0)
	)
	if opt.RPS > 0 {
		perCall = time.Duration(float64(time.Second) / opt.RPS)
	}
	if opt.Total == 0 {
		time.AfterFunc(opt.Duration, func() { stop.Store(true) })
	}
	for range opt.Workers {
		wg.Go(func() {
			send := d.worker()
			local := make([]time.Duration, 0, 4096)
			var allowed, denied, errs int
			var firstErr error
			for !stop.Load() {
				i := next.Add(1) - 1
				if limit > 0 && i >= limit {
					break
				}
				if perCall > 0 {
					if wait := time.Until(start.Add(time.Duration(i) * perCall)); wait > 0 {
						time.Sleep(wait)
					}
					if stop.Load() {
						break
					}
				}
				t0 := time.Now()
				ok, err := send(int(i) + opt.Offset)
				local = append(local, time.Since(t0))
				switch {
				case err != nil:
					errs++
					if firstErr == nil {
						firstErr = err
					}
				case ok:
					allowed++
				default:
					denied++
				}
			}
			mu.Lock()
			lats = append(lats, local...)
			res.Allowed += allowed
			res.Denied += denied
			res.Errors += errs
			if firstErr != nil && res.FirstErr == "" {
				res.FirstErr = firstErr.Error()
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lats)
	res.Count = len(lats)
	res.Seconds = elapsed.Seconds()
	res.RPS = float64(res.Count) / elapsed.Seconds()
	pct := func(p float64) float64 {
		if len(lats) == 0 {
			return 0
		}
		return float64(lats[int(p*float64(len(lats)-1))]) / 1e6
	}
	res.P50ms, res.P90ms, res.P99ms, res.P999ms = pct(0.50), pct(0.90), pct(0.99), pct(0.999)
	if len(lats) > 0 {
		res.MaxMs = float64(lats[len(lats)-1]) / 1e6
	}
	return res
}
