package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/server"
)

// drainDeadline is how long `writ serve` lets requests and streams in flight
// finish after SIGTERM.
const drainDeadline = 30 * time.Second

// serveCmd runs `writ serve`. Everything it writes on stderr is writ's JSON
// log, configuration problems included.
func serveCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve", "writ serve [-config writ.yaml] [-listen ADDR] [-admin ADDR] [-upstream URL] [-policies DIR] [-log-level LEVEL]",
		"Runs the sidecar (and Envoy mode when configured) in front of the configured agents.")
	path := fs.String("config", "writ.yaml", "the configuration file")
	listen := fs.String("listen", "", "the sidecar's address (overrides listen)")
	admin := fs.String("admin", "", "the admin listener's address (overrides admin)")
	upstream := fs.String("upstream", "", "the first agent's upstream URL (overrides agents[0].upstream: a sidecar has one)")
	policies := fs.String("policies", "", "a policy directory (overrides policies; default: the shipped policies embedded in writ)")
	level := fs.String("log-level", "", "debug, info, warn or error (overrides log.level)")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	lv := new(slog.LevelVar)
	lv.Set(server.ParseLevel(*level))
	log := server.NewLogger(stderr, lv)
	server.InstallLogger(log, stderr)
	cfg, err := config.Load(*path)
	if err != nil {
		logProblems(log, *path, err)
		return 1
	}
	if *level == "" {
		lv.Set(server.ParseLevel(cfg.Log.Level))
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *admin != "" {
		cfg.Admin = *admin
	}
	if *upstream != "" && len(cfg.Agents) > 0 {
		cfg.Agents[0].Upstream = *upstream
	}
	if *policies != "" {
		cfg.Policies = []string{*policies}
	}
	if cfg.Store.Kind == "" {
		// The default of `writ serve`: nothing lost on kill -9. Memory is an
		// explicit choice (store.kind: memory).
		cfg.Store.Kind = config.StoreFile
	}
	if err := cfg.Validate(); err != nil {
		logProblems(log, *path, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	s, err := server.New(ctx, cfg, server.WithLogger(log), server.WithVersion(versionString()))
	if err != nil {
		log.Error("refusing to start", "error", err.Error())
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reloadOnHangup(ctx, s, hup, log)
	<-ctx.Done()
	log.Info("shutting down: draining in-flight requests", "deadline", drainDeadline.String())
	sctx, cancel := context.WithTimeout(context.Background(), drainDeadline)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		// Each error is logged where it happened; the exit says some work
		// was lost (requests cut, audit lines or a store write not flushed).
		return 1
	}
	return 0
}

// reloadOnHangup reloads the policy on each SIGHUP until ctx ends.
func reloadOnHangup(ctx context.Context, s *server.Server, hup <-chan os.Signal, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-hup:
			if s.Reloadable() {
				log.Info("reloading policies on signal", "signal", sig.String())
			} else {
				log.Info("SIGHUP: nothing to reload: the policies are the ones embedded in writ (set policies: to load files)")
			}
			// A refused reload is logged by the reloader (the last good
			// policy keeps serving); ErrNoReload was said just above.
			_ = s.Reload(ctx)
		}
	}
}

// logProblems logs a configuration that cannot be served: one line per
// problem, with its file, line and key.
func logProblems(log *slog.Logger, path string, err error) {
	var ps *config.Problems
	if !errors.As(err, &ps) {
		log.Error("invalid configuration", "config", path, "error", err.Error())
		return
	}
	for _, p := range ps.List {
		log.Error("invalid configuration: "+p.Msg, "config", path, "line", p.Line, "key", p.Key)
	}
}
