package cmdutil

import (
	"bytes"
	"strings"

	"github.com/spf13/cobra"
)

// TestIO is streams over memory for a command's tests (cli/cli's
// iostreams.Test): the command reads stdin and writes into the returned
// buffers.
func TestIO(stdin string) (ios *IOStreams, stdout, stderr *bytes.Buffer) {
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: strings.NewReader(stdin), Out: stdout, ErrOut: stderr}, stdout, stderr
}

// ParseFlags builds a command with newCmd and runs it with args, but with
// a run function that only keeps the options: what a flag test checks. The
// options are nil when parsing (or the command's own checks before it
// runs) failed.
func ParseFlags[O any](f *Factory, newCmd func(*Factory, func(*O) error) *cobra.Command, args ...string) (*O, error) {
	var got *O
	cmd := newCmd(f, func(o *O) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	return got, err
}
