package servecmd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/core/server/e2b"
)

// startE2B serves E2B's API (core/server/e2b) on addr of its own, beside
// rlm's: E2B's data plane has paths rlm's API has too (/health, /execute)
// and its own authentication, so it cannot share the listener without
// one shadowing the other. It returns a function that shuts it down.
func startE2B(addr string, srv *server.Server, token string, allowUnauthenticated bool, logger *slog.Logger, base context.Context) (func(context.Context), error) {
	if token == "" && !allowUnauthenticated && !loopback(addr) {
		return nil, cmdutil.Usage(fmt.Errorf("--e2b-addr %s is not a loopback address and the server has no token: anyone who reaches it could run code. "+
			"Set RLM_TOKEN (the SDKs then send it as E2B_API_KEY), listen on a loopback address (--e2b-addr 127.0.0.1:49983), "+
			"or pass --allow-unauthenticated behind a proxy that authenticates", addr))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s (--e2b-addr): %w", addr, err)
	}
	hs := &http.Server{
		Handler:           e2b.Handler(srv, token),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("E2B API listening", "addr", "http://"+ln.Addr().String(), "hint", "E2B_API_URL and E2B_SANDBOX_URL=http://"+ln.Addr().String())
	go func() { _ = hs.Serve(ln) }()
	return func(ctx context.Context) {
		if hs.Shutdown(ctx) != nil {
			_ = hs.Close()
		}
	}, nil
}
