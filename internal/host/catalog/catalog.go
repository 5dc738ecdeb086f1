// Package catalog is the host's one way to learn what a plugin is: find its
// binary, launch it once and ask its Info (the fingerprint: name, versions,
// availability, isolation levels, sessions, backend). `rlm plugins`, serve,
// the daemon and backend selection all go through it, so a plugin is never
// launched just to be asked, then launched again to be used.
package catalog

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/host/launch"
)

// Fingerprint is what a plugin said about itself when it was launched.
type Fingerprint struct {
	// Info is the plugin's answer; nil when Err is set.
	Info *core.Info
	// Err says why there is no Info: the plugin failed to start, or did
	// not answer.
	Err error
}

// Available reports whether the plugin can run its runtime here.
func (f Fingerprint) Available() bool { return f.Err == nil && f.Info != nil && f.Info.Available }

// Reason says why the plugin is unavailable: the first line of the error
// that kept it from answering, or the reason it gave.
func (f Fingerprint) Reason() string {
	if f.Err != nil {
		return firstLine(f.Err.Error())
	}
	if f.Info == nil {
		return ""
	}
	return f.Info.UnavailableReason
}

// Sessions reports whether the plugin offers REPL sessions.
func (f Fingerprint) Sessions() bool { return f.Info.Has("repl") }

// Isolation is the levels the plugin declares for its programs
// (core.Info.Declared); nil when it did not answer.
func (f Fingerprint) Isolation() []string {
	if f.Info == nil {
		return nil
	}
	return f.Info.Declared(false)
}

// SessionIsolation is the levels it declares for its sessions; nil for a
// plugin without sessions.
func (f Fingerprint) SessionIsolation() []string {
	if !f.Sessions() {
		return nil
	}
	return f.Info.Declared(true)
}

// Launched is a running plugin and its fingerprint; the caller kills it.
type Launched struct {
	*launch.Plugin
	Fingerprint
}

// Open finds the plugin called name on sp, launches it and asks its Info
// for runtime. An error means it is not there or did not start; a plugin
// that started but did not answer Info is returned running, with
// Fingerprint.Err set, so that its first real call reports the failure as
// it always has.
func Open(ctx context.Context, sp launch.SearchPath, name, runtime string) (*Launched, error) {
	path, err := sp.Find(name)
	if err != nil {
		return nil, err
	}
	p, err := launch.Launch(path)
	if err != nil {
		return nil, err
	}
	return &Launched{Plugin: p, Fingerprint: fingerprint(ctx, p, runtime)}, nil
}

func fingerprint(ctx context.Context, p *launch.Plugin, runtime string) Fingerprint {
	info, err := p.Client.Info(ctx, &pb.InfoRequest{Runtime: runtime})
	if err != nil {
		return Fingerprint{Err: err}
	}
	return Fingerprint{Info: pb.InfoFromProto(info)}
}

// Entry is one plugin of a listing.
type Entry struct {
	Name string
	Path string
	Fingerprint
}

// StartTimeout bounds each plugin's handshake in List: a plugin that hangs
// before it is listed as unavailable instead of holding up the whole list.
// Info keeps a longer bound (InfoTimeout): a real interpreter's version
// probe can take seconds on a loaded machine, and plugins are asked in
// parallel.
const (
	StartTimeout = 10 * time.Second
	InfoTimeout  = 20 * time.Second
)

// List finds every plugin on sp and fingerprints each, launching them in
// parallel and stopping each once it answered. A plugin that fails to start
// or to answer is listed with the reason (Fingerprint.Err).
func List(ctx context.Context, sp launch.SearchPath) []Entry { return ListOnly(ctx, sp, nil) }

// ListOnly is List of the plugins whose name keep accepts (all when keep
// is nil): the others are not launched. `rlm exec FILE` asks only the
// plugins whose extensions it does not know already.
func ListOnly(ctx context.Context, sp launch.SearchPath, keep func(name string) bool) []Entry {
	var found []launch.Found
	for _, f := range sp.All() {
		if keep == nil || keep(f.Name) {
			found = append(found, f)
		}
	}
	entries := make([]Entry, len(found))
	var wg sync.WaitGroup
	for i, f := range found {
		wg.Go(func() {
			entries[i] = Entry{Name: f.Name, Path: f.Path, Fingerprint: probe(ctx, f)}
		})
	}
	wg.Wait()
	return entries
}

func probe(ctx context.Context, f launch.Found) Fingerprint {
	p, err := launch.LaunchWithin(f.Path, StartTimeout)
	if err != nil {
		return Fingerprint{Err: err}
	}
	defer p.Kill()
	ctx, cancel := context.WithTimeout(ctx, InfoTimeout)
	defer cancel()
	return fingerprint(ctx, p, f.Name)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
