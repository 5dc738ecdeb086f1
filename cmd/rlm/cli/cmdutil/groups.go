package cmdutil

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// RejectUnknownSubcommands makes every command under root that has
// subcommands refuse a word that names none of them, with exit 2 and the
// closest names. Cobra does this only for the root: a parent with no run
// function of its own (`rlm trace`, `rlm config`) prints its help and
// exits 0 for `rlm trace veiw x`, so a typo in a script looks like
// success. Such a parent still prints its help when given nothing. A
// parent that runs itself (`rlm daemon`) keeps its own argument check and
// only gets the clearer message when that check refuses. Call it once the
// tree is complete, so that commands added later are covered too.
func RejectUnknownSubcommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		RejectUnknownSubcommands(c)
		if !c.HasSubCommands() {
			continue
		}
		own := c.Args
		if !c.Runnable() {
			own = cobra.NoArgs
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
		c.Args = func(c *cobra.Command, args []string) error {
			if own == nil {
				return nil
			}
			err := own(c, args)
			if err == nil || len(args) == 0 {
				return err
			}
			return unknownSubcommand(c, args[0])
		}
	}
}

// unknownSubcommand is the usage error for name under parent, with the
// subcommands it may have meant and where to see them all.
func unknownSubcommand(parent *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, parent.CommandPath())
	if parent.SuggestionsMinimumDistance <= 0 {
		parent.SuggestionsMinimumDistance = 2 // what cobra gives the root
	}
	if s := parent.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf(": did you mean %s?", strings.Join(s, " or "))
	}
	return Usagef("%s (see '%s --help' for its commands)", msg, parent.CommandPath())
}
