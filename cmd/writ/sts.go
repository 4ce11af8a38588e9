package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/server"
	"github.com/writ-authz/writ/sts"
)

// stsCmd runs `writ sts`: flag parsing and printing; the STS is package sts.
func stsCmd(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return runSTS(ctx, args, stdout, stderr)
}

// runSTS runs the STS until ctx ends. It prints the issuer, the token
// endpoint and the JWKS URL on stdout; everything on stderr is its JSON log.
func runSTS(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sts", "writ sts [-config sts.yaml] [-listen ADDR] [-issuer URL] [-audiences A,B] [-key FILE] [-ephemeral] [-log-level LEVEL]",
		"Runs writ's development and CI STS: RFC 8693 token exchange that only narrows authority (docs/sts.md).\n"+
			"Not a production STS: docs/production-sts.md says how to make one enforce the same rules.")
	path := fs.String("config", "", "the STS's configuration file (sts.yaml); without one, the flags alone")
	listen := fs.String("listen", "", "the address to listen on (overrides listen; default "+config.DefaultSTSListen+")")
	issuer := fs.String("issuer", "", "the issuer URL (overrides issuer; default http://<listen address>)")
	audiences := fs.String("audiences", "", "the targets, comma-separated (overrides audiences), e.g. agent:payments,agent:kyc")
	key := fs.String("key", "", "the signing key file (overrides signing_key_file; default sts-key.jwk in the development directory)")
	ephemeral := fs.Bool("ephemeral", false, "sign with a key generated at start and never written")
	level := fs.String("log-level", "", "debug, info, warn or error (overrides log.level)")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "writ sts: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	lv := new(slog.LevelVar)
	lv.Set(server.ParseLevel(*level))
	log := server.NewLogger(stderr, lv)
	server.InstallLogger(log, stderr)
	cfg := &config.STS{}
	if *path != "" {
		var err error
		if cfg, err = config.LoadSTS(*path); err != nil {
			logProblems(log, *path, err)
			return 1
		}
		if *level == "" {
			lv.Set(server.ParseLevel(cfg.Log.Level))
		}
	}
	applySTSFlags(cfg, *listen, *issuer, *audiences, *key, *ephemeral)
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		logProblems(log, *path, err)
		return 1
	}
	for _, w := range cfg.Warnings() {
		log.Warn("configuration: "+w.Msg, "key", w.Key, "line", w.Line)
	}
	s, err := sts.New(*cfg, log)
	if err == nil {
		err = s.Listen()
	}
	if err != nil {
		log.Error("refusing to start", "error", err.Error())
		return 1
	}
	fmt.Fprintf(stdout, "issuer:         %s\ntoken endpoint: %s\njwks:           %s\ndiscovery:      %s\n",
		s.Issuer(), s.TokenEndpoint(), s.JWKSURL(), s.DiscoveryURL())
	log.Info("writ sts is serving (for development and CI)", "listen", s.Addr(), "issuer", s.Issuer(),
		"token_endpoint", s.TokenEndpoint(), "jwks_uri", s.JWKSURL(), "audiences", cfg.Audiences,
		"max_lifetime", cfg.MaxLifetime.String(), "max_chain_depth", cfg.MaxChainDepth, "may_act", cfg.MayAct,
		"version", versionString())
	<-ctx.Done()
	log.Info("shutting down", "deadline", "10s")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		log.Warn("shutdown", "error", err.Error())
	}
	return 0
}

// applySTSFlags lays the flags over the file's settings. Without a key file
// from either, the key is kept in the development directory, so tokens
// verify across restarts; -ephemeral keeps it in memory only.
func applySTSFlags(cfg *config.STS, listen, issuer, audiences, key string, ephemeral bool) {
	if listen != "" {
		cfg.Listen = listen
	}
	if issuer != "" {
		cfg.Issuer = issuer
	}
	if audiences != "" {
		cfg.Audiences = commaList(audiences)
	}
	switch {
	case ephemeral:
		cfg.SigningKeyFile = ""
	case key != "":
		cfg.SigningKeyFile = key
	case cfg.SigningKeyFile == "":
		cfg.SigningKeyFile = filepath.Join(devidp.DefaultDir(), "sts-key.jwk")
	}
}
