package demo

import (
	"context"
	"log/slog"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/server"
)

// StartServer is the StartFunc of `writ demo`: writ built by the one
// assembly, exactly as `writ serve` builds it, in this process.
func StartServer(ctx context.Context, cfg *config.Config, log *slog.Logger) (Writ, error) {
	s, err := server.New(ctx, cfg, server.WithLogger(log))
	if err != nil {
		return nil, err
	}
	return served{s}, nil
}

// served is a running writ as the demo sees it.
type served struct{ *server.Server }

// Close drains writ for a few seconds; what does not stop cleanly is
// logged (and counted) by the server.
func (w served) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = w.Shutdown(ctx)
}
