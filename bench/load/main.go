// Command load drives writ's ext_authz gRPC server the way ghz does, but with a
// request that changes from call to call: N workers on one HTTP/2 connection send
// pre-built CheckRequests (read from a file of length-prefixed, already marshaled
// messages), either as fast as the server answers or at a fixed rate, and print
// one JSON summary: throughput, latency percentiles, allowed and denied counts.
//
// Usage: load -addr 127.0.0.1:19191 -requests reqs.bin -c 16 -duration 10s [-rps 2000] [-n 100000]
//
// Latency is measured from the moment a worker sends a call until its answer
// arrives (as ghz measures it); at a fixed rate each worker waits for its slot
// in the schedule first, so a server that falls behind shows as a lower
// achieved rate, not as a longer queue inside the client.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
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

const method = "/envoy.service.auth.v3.Authorization/Check"

// Result is what one run prints.
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

// raw is an already marshaled request; codec passes it through untouched.
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

func main() {
	addr := flag.String("addr", "127.0.0.1:19191", "ext_authz gRPC address")
	file := flag.String("requests", "", "file of length-prefixed marshaled CheckRequests")
	workers := flag.Int("c", 16, "concurrent workers")
	dur := flag.Duration("duration", 10*time.Second, "how long to send (ignored with -n)")
	rps := flag.Float64("rps", 0, "fixed total rate (0: as fast as answered)")
	total := flag.Int("n", 0, "send exactly this many calls, then stop")
	offset := flag.Int("offset", 0, "index of the first request to send")
	flag.Parse()
	reqs, err := readRequests(*file)
	if err != nil {
		fail(err)
	}
	res, err := run(*addr, reqs, *workers, *dur, *rps, *total, *offset)
	if err != nil {
		fail(err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "load:", err)
	os.Exit(1)
}

func readRequests(path string) ([]raw, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var out []raw
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

func run(addr string, reqs []raw, workers int, dur time.Duration, rps float64, total, offset int) (Result, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{})))
	if err != nil {
		return Result{}, err
	}
	defer conn.Close()
	// One call first: the connection is up before the clock starts.
	var first authv3.CheckResponse
	if err := conn.Invoke(context.Background(), method, &reqs[offset%len(reqs)], &first); err != nil {
		return Result{}, fmt.Errorf("first call: %w", err)
	}
	var (
		next    atomic.Int64
		stop    atomic.Bool
		mu      sync.Mutex
		lats    []time.Duration
		res     = Result{Workers: workers, TargetRPS: rps}
		wg      sync.WaitGroup
		start   = time.Now()
		limit   = int64(total)
		perCall = time.Duration(0)
	)
	if rps > 0 {
		perCall = time.Duration(float64(time.Second) / rps)
	}
	if total == 0 {
		time.AfterFunc(dur, func() { stop.Store(true) })
	}
	for range workers {
		wg.Go(func() {
			local := make([]time.Duration, 0, 4096)
			var allowed, denied, errs int
			var firstErr error
			var resp authv3.CheckResponse
			for !stop.Load() {
				i := next.Add(1) - 1
				if limit > 0 && i >= limit {
					break
				}
				if perCall > 0 {
					if d := time.Until(start.Add(time.Duration(i) * perCall)); d > 0 {
						time.Sleep(d)
					}
					if stop.Load() {
						break
					}
				}
				req := &reqs[(int(i)+offset)%len(reqs)]
				t0 := time.Now()
				err := conn.Invoke(context.Background(), method, req, &resp)
				local = append(local, time.Since(t0))
				switch {
				case err != nil:
					errs++
					if firstErr == nil {
						firstErr = err
					}
				case resp.GetStatus().GetCode() == 0:
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
		i := int(p * float64(len(lats)-1))
		return float64(lats[i]) / 1e6
	}
	res.P50ms, res.P90ms, res.P99ms, res.P999ms = pct(0.50), pct(0.90), pct(0.99), pct(0.999)
	if len(lats) > 0 {
		res.MaxMs = float64(lats[len(lats)-1]) / 1e6
	}
	return res, nil
}
