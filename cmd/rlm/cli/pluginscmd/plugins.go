// Package pluginscmd implements `rlm plugins`.
package pluginscmd

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/internal/host/catalog"
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
	// for its programs and its REPL sessions (core.Info.Declared): the
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
			rows := toRows(catalog.List(cmd.Context(), f.SearchPath()))
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

// toRows turns the catalog into what the command prints.
func toRows(entries []catalog.Entry) []Row {
	rows := make([]Row, len(entries))
	for i, e := range entries {
		rows[i] = Row{Name: e.Name, Path: e.Path, Available: e.Available(), Reason: e.Reason(),
			Isolation: e.Isolation(), SessionIsolation: e.SessionIsolation()}
		if e.Info != nil {
			rows[i].Version, rows[i].RuntimeVersion = e.Info.PluginVersion, e.Info.RuntimeVersion
		}
	}
	return rows
}

// levels shows a declared list; "-" for a plugin without sessions.
func levels(l []string) string {
	if len(l) == 0 {
		return "-"
	}
	return strings.Join(l, ",")
}
