// Command load drives writ's ext_authz or ext_proc gRPC server the way ghz
// does, but with a request that may change from call to call and with
// ext_proc's streams as Envoy opens them (bench/loadgen): N workers on one
// HTTP/2 connection send pre-built requests (read from a file of
// length-prefixed, already marshaled CheckRequests), either as fast as the
// server answers or at a fixed rate, and print one JSON summary: throughput,
// latency percentiles, allowed and denied counts.
//
// Usage: load -addr 127.0.0.1:19191 -requests reqs.bin -c 16 -duration 10s [-rps 2000] [-n 100000]
// [-door ext_proc -phases request|request+response]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/writ-authz/writ/bench/loadgen"
)

func main() {
	var opt loadgen.Options
	flag.StringVar(&opt.Addr, "addr", "127.0.0.1:19191", "the door's gRPC address")
	file := flag.String("requests", "", "file of length-prefixed marshaled CheckRequests")
	flag.StringVar(&opt.Door, "door", loadgen.ExtAuthz, "ext_authz (one Check per request) or ext_proc (one Process stream per request)")
	flag.StringVar(&opt.Phases, "phases", loadgen.PhaseRequest, "ext_proc: request, or request+response (the agent's JSON answer too)")
	flag.IntVar(&opt.Workers, "c", 16, "concurrent workers")
	flag.DurationVar(&opt.Duration, "duration", 10*time.Second, "how long to send (ignored with -n)")
	flag.Float64Var(&opt.RPS, "rps", 0, "fixed total rate (0: as fast as answered)")
	flag.IntVar(&opt.Total, "n", 0, "send exactly this many calls, then stop")
	flag.IntVar(&opt.Offset, "offset", 0, "index of the first request to send")
	flag.Parse()
	reqs, err := loadgen.ReadRequests(*file)
	if err != nil {
		fail(err)
	}
	res, err := loadgen.Run(reqs, opt)
	if err != nil {
		fail(err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "load:", err)
	os.Exit(1)
}
