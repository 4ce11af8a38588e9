package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/writ-authz/writ/admin"
)

// startAdmin opens the admin listener (admin:) and serves the admin API on
// it: probes, the policy and its reloads, task records, metrics.
func (s *Server) startAdmin(context.Context) error {
	var token string
	if s.cfg.AdminTokenFile != "" {
		var err error
		if token, err = admin.LoadToken(s.cfg.AdminTokenFile); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", s.cfg.Admin)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	d := admin.Deps{Engine: s.engine, Store: s.store, StoreReady: s.store.ping, Ready: s.core.Ready,
		Metrics: s.metrics.Handler(), Pprof: s.cfg.AdminPprof, Logger: s.log,
		Addrs: []string{s.cfg.Admin, ln.Addr().String()}, Hosts: s.cfg.AdminHosts, Token: token}
	if s.reloader != nil || s.shadowReloader != nil {
		// Never a nil *authz.Reloader in the interface.
		d.Reloader = policyReloads{live: s.reloader, shadow: s.shadowReloader}
	}
	if s.shadow != nil {
		d.Shadow, d.ShadowReloader = s.shadow, s.shadowReloader
	}
	if s.fleet != nil {
		d.Status = s.fleet.Status
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: admin.New(d),
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.admin = &httpListener{key: "admin", srv: srv, ln: ln,
		failed: func(err error) { s.servingFailed(componentAdmin, err) }}
	s.admin.start()
	s.errs.add(componentAdmin)
	s.started(componentAdmin, s.admin.shutdown)
	return nil
}
