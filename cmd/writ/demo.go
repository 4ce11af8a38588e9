package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/writ-authz/writ/internal/demo"
	"github.com/writ-authz/writ/server"
)

// demoCmd runs `writ demo [-serve] [-listen 127.0.0.1:0] [-decision-log FILE]`:
// the scenario of internal/demo against writ as `writ serve` builds it.
func demoCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo", "writ demo [-serve] [-listen 127.0.0.1:0] [-decision-log FILE]",
		"Runs writ in front of real demo agents (the seed's A2A agents) through the whole delegation scenario\n"+
			"with a real A2A client. Its log on stderr is writ's JSON log, warnings and errors only.")
	serve := fs.Bool("serve", false, "keep writ and the agents running after the scenario (until Ctrl-C)")
	listen := fs.String("listen", "127.0.0.1:0", "writ's address (loopback only; port 0 picks a free port)")
	decisions := fs.String("decision-log", "writ-demo-decisions.jsonl", "where writ writes the demo's decision log (render it with writ report)")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := server.NewLogger(stderr, slog.LevelWarn)
	server.InstallLogger(log, stderr)
	opt := demo.Options{Listen: *listen, Serve: *serve, Log: log, DecisionLog: *decisions,
		Start: demo.StartServer, Command: commandName()}
	if err := demo.Run(ctx, stdout, opt); err != nil {
		fmt.Fprintf(stderr, "writ demo: %v\n", err)
		return 1
	}
	return 0
}

// commandName is how the demo's printed commands should name this binary so
// that they work as printed: "go run ./cmd/writ" under go run (whose binary
// is gone when it exits), otherwise the name it was started by.
func commandName() string {
	if exe, err := os.Executable(); err == nil && strings.Contains(filepath.ToSlash(exe), "/go-build") {
		return "go run ./cmd/writ"
	}
	if name := os.Args[0]; strings.ContainsRune(name, filepath.Separator) {
		return name
	}
	return "writ"
}
