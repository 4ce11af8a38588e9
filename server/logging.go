package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/grpclog"
)

// writ's own log is one format everywhere: JSON lines (slog's JSON handler)
// with time, level and msg, and the decision log's field names for what both
// name (task_id, context_id, decision_id, route, policy_revision, error).
// NewLogger builds it; InstallLogger makes it the process's only log: the
// standard library's log package (and so every net/http server without an
// ErrorLog of its own), gRPC's logger and go-redis's logger all write
// through it. Every command that logs (serve, demo, sts) uses it.

// fieldNames maps the names some of writ's packages give a field to the
// decision log's name for it, so a grep for one id finds both logs' lines.
var fieldNames = map[string]string{
	"err":      "error",
	"revision": "policy_revision",
	"agent":    "route", // the decision log's route is the agent's name
}

// ParseLevel reads log.level (debug, info, warn, error; empty is info).
func ParseLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil || s == "" {
		return slog.LevelInfo
	}
	return l
}

// NewLogger is writ's log: JSON lines on w from level up.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 {
				if name, ok := fieldNames[a.Key]; ok {
					a.Key = name
				}
			}
			return a
		}}))
}

var installOnce sync.Mutex

// InstallLogger makes l the log of everything in the process that logs on
// its own: the log package's default logger (net/http's servers without an
// ErrorLog, any library's log.Printf), gRPC and go-redis. Only a command
// writing to the process's own stderr installs it (a test running a command
// in-process with a buffer must not make that buffer every later test's log).
func InstallLogger(l *slog.Logger, w io.Writer) {
	if w != os.Stderr {
		return
	}
	installOnce.Lock()
	defer installOnce.Unlock()
	slog.SetDefault(l)
	grpclog.SetLoggerV2(grpcLogger{l.With("library", "grpc")})
	redis.SetLogger(redisLogger{l.With("library", "go-redis")})
}

// grpcLogger is gRPC's logger on writ's log: its info lines at debug (gRPC
// is chatty at info), warnings and errors as such.
type grpcLogger struct{ l *slog.Logger }

func (g grpcLogger) Info(args ...any)                 { g.l.Debug(fmt.Sprint(args...)) }
func (g grpcLogger) Infoln(args ...any)               { g.l.Debug(strings.TrimSuffix(fmt.Sprintln(args...), "\n")) }
func (g grpcLogger) Infof(format string, args ...any) { g.l.Debug(fmt.Sprintf(format, args...)) }
func (g grpcLogger) Warning(args ...any)              { g.l.Warn(fmt.Sprint(args...)) }
func (g grpcLogger) Warningln(args ...any) {
	g.l.Warn(strings.TrimSuffix(fmt.Sprintln(args...), "\n"))
}
func (g grpcLogger) Warningf(format string, args ...any) { g.l.Warn(fmt.Sprintf(format, args...)) }
func (g grpcLogger) Error(args ...any)                   { g.l.Error(fmt.Sprint(args...)) }
func (g grpcLogger) Errorln(args ...any) {
	g.l.Error(strings.TrimSuffix(fmt.Sprintln(args...), "\n"))
}
func (g grpcLogger) Errorf(format string, args ...any) { g.l.Error(fmt.Sprintf(format, args...)) }
func (g grpcLogger) Fatal(args ...any)                 { g.l.Error(fmt.Sprint(args...)); os.Exit(1) }
func (g grpcLogger) Fatalln(args ...any) {
	g.l.Error(strings.TrimSuffix(fmt.Sprintln(args...), "\n"))
	os.Exit(1)
}
func (g grpcLogger) Fatalf(format string, args ...any) {
	g.l.Error(fmt.Sprintf(format, args...))
	os.Exit(1)
}

// V reports whether gRPC's verbose logging at level v is on: only when writ
// logs at debug, and then its first level.
func (g grpcLogger) V(v int) bool {
	return v <= 0 || v == 1 && g.l.Enabled(context.Background(), slog.LevelDebug)
}

// redisLogger is go-redis's logger on writ's log (its lines are warnings:
// reconnects, pool trouble).
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, args ...any) {
	r.l.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, args...)))
}
