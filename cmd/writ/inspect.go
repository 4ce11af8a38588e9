package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/writ-authz/writ/adapters/examples"
	"github.com/writ-authz/writ/adapters/names"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/server"
)

type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

func inspect(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("inspect", "writ inspect -file FILE | -example NAME | -path P [-method M] [-header 'K: V']... [-body FILE] [flags]",
		`Shows what a policy will see of one request: {"request": ...} for a request writ accepts (exit 0), or
{"fault": ..., "answer": ...} with the exact protocol error it would send (exit 1).

  writ inspect -file request.http
  writ inspect -path /message:send -header 'A2A-Version: 1.0' -body body.json
  writ inspect -example a2a-1.0-send`)
	file := fs.String("file", "", "a whole HTTP/1.1 request message (request line, headers, blank line, body); - for stdin")
	example := fs.String("example", "", "inspect a bundled example request (-example list shows them)")
	method := fs.String("method", "POST", "request method (with -path)")
	path := fs.String("path", "", "request path and query (instead of -file)")
	body := fs.String("body", "", "file holding the request body (with -path)")
	protocol := fs.String("protocol", names.Auto, names.Choices()+" (by path)")
	maxBody := fs.Int64("max-body", wire.DefaultMaxBodyBytes, "largest body accepted, in bytes")
	maxDepth := fs.Int("max-depth", wire.DefaultMaxJSONDepth, "deepest JSON nesting accepted")
	var headers headerFlags
	fs.Var(&headers, "header", `a request header "Name: value" (repeatable, with -path)`)
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	lim := wire.Limits{MaxBodyBytes: *maxBody, MaxJSONDepth: *maxDepth}
	in, err := readInbound(*file, *example, *method, *path, *body, headers, lim, stdin, stdout)
	if errors.Is(err, errListed) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "writ inspect: %v\n", err)
		return 2
	}
	out, err := server.Inspect(in, *protocol, lim)
	if err != nil {
		fmt.Fprintf(stderr, "writ inspect: %v\n", err)
		return 2
	}
	code := 0
	if out.Fault != nil {
		code = 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(stderr, "writ inspect: %v\n", err)
		return 2
	}
	return code
}

var errListed = errors.New("examples listed")

func readInbound(file, example, method, path, body string, headers headerFlags, lim wire.Limits, stdin io.Reader, stdout io.Writer) (wire.Inbound, error) {
	sources := 0
	for _, s := range []string{file, example, path} {
		if s != "" {
			sources++
		}
	}
	if sources != 1 {
		return wire.Inbound{}, errors.New("give exactly one of -file, -example or -path (see -h)")
	}
	switch {
	case example == "list":
		fmt.Fprintln(stdout, strings.Join(examples.Names(), "\n"))
		return wire.Inbound{}, errListed
	case example != "":
		raw, err := examples.Read(example)
		if err != nil {
			return wire.Inbound{}, fmt.Errorf("no bundled example %q (-example list shows them)", example)
		}
		return wire.ReadExample(raw, lim.MaxBodyBytes)
	case file != "":
		var raw []byte
		var err error
		if file == "-" {
			raw, err = io.ReadAll(io.LimitReader(stdin, lim.MaxBodyBytes+64<<10))
		} else {
			raw, err = os.ReadFile(file)
		}
		if err != nil {
			return wire.Inbound{}, err
		}
		return wire.ReadExample(raw, lim.MaxBodyBytes)
	}
	u, err := url.ParseRequestURI(path)
	if err != nil {
		return wire.Inbound{}, fmt.Errorf("-path %q: %w", path, err)
	}
	h := http.Header{}
	for _, line := range headers {
		name, value, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return wire.Inbound{}, fmt.Errorf("-header %q: want \"Name: value\"", line)
		}
		h.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	in := wire.Inbound{Method: strings.ToUpper(method), Path: u.Path, Query: u.Query(), Header: h}
	if body != "" {
		b, err := os.ReadFile(body)
		if err != nil {
			return wire.Inbound{}, err
		}
		if int64(len(b)) > lim.MaxBodyBytes {
			// Let the adapter refuse it in protocol shape.
			b = b[:lim.MaxBodyBytes+1]
		}
		in.Body = b
	}
	return in, nil
}
