package servecmd

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/rlmkit/rlm/core/server"
)

// registerDrainFlag adds --drain-grace (see drainGrace).
func (o *Options) registerDrainFlag(fl *pflag.FlagSet) {
	fl.DurationVar(&o.DrainGrace, "drain-grace", 0, "on SIGTERM/SIGINT, first fail /health (readiness) and keep serving every request for this long, so a load balancer (a Kubernetes Service) stops sending before the listener closes; then --grace applies (env RLM_DRAIN_GRACE; default 0: close at once)")
}

// drainGrace is --drain-grace, else RLM_DRAIN_GRACE, else 0. It is not a
// [serve] key: it belongs to how a replica is deployed (the manifest sets
// it beside its preStop hook and terminationGracePeriodSeconds), not to
// what the server runs.
func (o *Options) drainGrace() (time.Duration, error) {
	if o.Changed != nil && o.Changed("drain-grace") {
		if o.DrainGrace < 0 {
			return 0, fmt.Errorf("--drain-grace must not be negative")
		}
		return o.DrainGrace, nil
	}
	v := os.Getenv("RLM_DRAIN_GRACE")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("RLM_DRAIN_GRACE=%q is not a duration such as 5s", v)
	}
	return d, nil
}

// drainFirst is the first step of stopping (core/server/drain.go): readiness
// fails and requests keep being served for d, or until the listener fails.
func drainFirst(srv *server.Server, d time.Duration, logger *slog.Logger, served <-chan error) error {
	if d <= 0 {
		return nil
	}
	srv.Unready()
	logger.Info("draining: /health fails, requests are still served", "drain_grace", d.String(), "in_flight", srv.InFlight())
	select {
	case <-time.After(d):
		return nil
	case err := <-served:
		return err
	}
}
