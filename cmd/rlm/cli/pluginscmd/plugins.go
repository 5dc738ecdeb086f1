// Package pluginscmd implements `rlm plugins`.
package pluginscmd

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core"
	pb "github.com/rlmkit/rlm/core/proto"
	"github.com/rlmkit/rlm/internal/launch"
)

// Row is one plugin as `rlm plugins --json` prints it.
type Row struct {
	Name           string `json:"name"`
	Path           string `json:"path"`
	Version        string `json:"version,omitempty"`
	RuntimeVersion string `json:"runtime_version,omitempty"`
	Available      bool   `json:"available"`
	Reason         string `json:"reason,omitempty"`
	// Isolation and SessionIsolation are the levels the plugin declares
	// for its programs and its REPL sessions (core.DeclaredLevels): the
	// only ones rlm runs it at.
	Isolation        []string `json:"isolation,omitempty"`
	SessionIsolation []string `json:"session_isolation,omitempty"`
}

// NewCmd builds the command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "List runtime plugins with their path, version, availability and isolation levels",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, _, err := f.Config(); err != nil {
				return err
			}
			rows := Probe(cmd.Context(), f.SearchPath().All())
			if asJSON {
				enc := json.NewEncoder(f.IO.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			if len(rows) == 0 {
				fmt.Fprintf(f.IO.ErrOut, "no plugins found; rlm looked in %s\n", strings.Join(f.SearchPath(), ", "))
				return cmdutil.Exit(cmdutil.ExitFailure)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVERSION\tRUNTIME\tAVAILABLE\tISOLATION\tSESSIONS\tPATH")
			for _, r := range rows {
				avail := "yes"
				if !r.Available {
					avail = "no: " + r.Reason
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Version, r.RuntimeVersion, avail,
					levels(r.Isolation), levels(r.SessionIsolation), r.Path)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// Probe starts each plugin (in parallel) and asks for its Info. A plugin that
// fails to start is listed as unavailable with the reason.
func Probe(ctx context.Context, found []launch.Found) []Row {
	rows := make([]Row, len(found))
	var wg sync.WaitGroup
	for i, fp := range found {
		wg.Add(1)
		go func(i int, fp launch.Found) {
			defer wg.Done()
			rows[i] = probeOne(ctx, fp)
		}(i, fp)
	}
	wg.Wait()
	return rows
}

// StartTimeout bounds each plugin's handshake: a plugin that hangs before
// it is listed as unavailable instead of holding up the whole list. Info
// keeps a longer bound: a real interpreter's version probe can take seconds
// on a loaded machine, and plugins are probed in parallel.
const StartTimeout = 10 * time.Second

func probeOne(ctx context.Context, fp launch.Found) Row {
	r := Row{Name: fp.Name, Path: fp.Path}
	p, err := launch.LaunchWithin(fp.Path, StartTimeout)
	if err != nil {
		r.Reason = oneLine(err.Error())
		return r
	}
	defer p.Kill()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	info, err := p.Client.Info(ctx, &pb.InfoRequest{Runtime: fp.Name})
	if err != nil {
		r.Reason = oneLine(err.Error())
		return r
	}
	r.Version, r.RuntimeVersion = info.GetPluginVersion(), info.GetRuntimeVersion()
	r.Available, r.Reason = info.GetAvailable(), info.GetUnavailableReason()
	r.Isolation = core.DeclaredLevels(info, false)
	if slices.Contains(info.GetCapabilities(), "repl") {
		r.SessionIsolation = core.DeclaredLevels(info, true)
	}
	return r
}

// levels shows a declared list; "-" for a plugin without sessions.
func levels(l []string) string {
	if len(l) == 0 {
		return "-"
	}
	return strings.Join(l, ",")
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
