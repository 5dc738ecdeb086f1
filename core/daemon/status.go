package daemon

import (
	"os"
	"time"
)

// RuntimeStatus is one runtime's line in the daemon's status.
type RuntimeStatus struct {
	Name string `json:"name"`
	// Pooled runtimes keep warm workers.
	Pooled  bool         `json:"pooled"`
	Workers *WorkerStats `json:"workers,omitempty"`
	// Sessions is the number of sessions served, WarmSessions how many of
	// them from the pool.
	Sessions     int64 `json:"sessions"`
	WarmSessions int64 `json:"warm_sessions"`
	Runs         int64 `json:"runs"`
	WarmRuns     int64 `json:"warm_runs"`
	// WorkersLost counts workers that died while serving a client (the
	// client got an error).
	WorkersLost int64 `json:"workers_lost"`
	// PluginRunning: a plugin process for this runtime is up; PluginStarts
	// counts launches (two processes per runtime, one for programs and one
	// for sessions; more when one died and was started again).
	PluginRunning bool   `json:"plugin_running"`
	PluginStarts  int    `json:"plugin_starts"`
	PluginPath    string `json:"plugin_path,omitempty"`
	// PluginModified and PluginSize identify the build of PluginPath that
	// is serving (a rebuilt binary is restarted on the next request);
	// PluginVersion and RuntimeVersion are what that process declared.
	PluginModified *time.Time `json:"plugin_modified,omitempty"`
	PluginSize     int64      `json:"plugin_size,omitempty"`
	PluginVersion  string     `json:"plugin_version,omitempty"`
	RuntimeVersion string     `json:"runtime_version,omitempty"`
}

// WorkerStats is a pooled runtime's warm workers, as its pool counts them
// (the host's pool package, internal/host/pool, which code outside this
// module cannot name).
type WorkerStats struct {
	Size    int `json:"size"`    // target number of idle workers
	Idle    int `json:"warm"`    // ready now
	Opening int `json:"opening"` // being started in the background
	Busy    int `json:"busy"`    // handed out and still running
	Served  int `json:"served"`  // handed out in total
	Crashed int `json:"crashed"` // died while idle, and were replaced
	Trimmed int `json:"trimmed"` // closed because idle workers exceeded Size
	Failed  int `json:"failed"`  // opens that failed
	// LastError is the last open failure, "" after a later success.
	LastError string `json:"last_error,omitempty"`
}

// Status is what `rlm daemon status` shows.
type Status struct {
	PID      int             `json:"pid"`
	Started  time.Time       `json:"started"`
	Uptime   float64         `json:"uptime_seconds"`
	Socket   string          `json:"socket"`
	Workers  int             `json:"workers_per_runtime"`
	Runtimes []RuntimeStatus `json:"runtimes"`
}

// Status reports the daemon's state.
func (s *Server) Status() Status {
	st := Status{
		PID: os.Getpid(), Started: s.started, Uptime: time.Since(s.started).Seconds(),
		Socket: s.paths.Socket, Runtimes: []RuntimeStatus{},
	}
	s.mu.Lock()
	st.Workers = s.cfg.Workers
	s.mu.Unlock()
	for _, h := range s.hostList() {
		rs := RuntimeStatus{
			Name: h.name, Pooled: h.pool != nil,
			Sessions: h.sessions.Load(), WarmSessions: h.warmHits.Load(),
			Runs: h.runs.Load(), WarmRuns: h.warmRuns.Load(), WorkersLost: h.workersLost.Load(),
		}
		if h.pool != nil {
			ws := WorkerStats(h.pool.Stats())
			rs.Workers = &ws
		}
		for _, p := range h.plugs {
			ps := p.Status()
			rs.PluginStarts += ps.Launches
			if ps.Running {
				rs.PluginRunning = true
				rs.PluginPath = ps.Plugin
				if !ps.PluginModified.IsZero() {
					m := ps.PluginModified
					rs.PluginModified, rs.PluginSize = &m, ps.PluginSize
				}
				if ps.PluginVersion != "" {
					rs.PluginVersion, rs.RuntimeVersion = ps.PluginVersion, ps.RuntimeVersion
				}
			}
		}
		st.Runtimes = append(st.Runtimes, rs)
	}
	return st
}
