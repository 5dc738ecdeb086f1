package tracecmd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/reftrace"
	"github.com/rlmkit/rlm/core/traceview"
)

// FormatReference names the reference implementation's JSONL log
// (alexzhang13/rlm's RLMLogger) for --format.
const FormatReference = "reference"

// NewCmdExport builds `rlm trace export`.
func NewCmdExport(f *cmdutil.Factory) *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "export --format reference TRACE [-o LOG.jsonl]",
		Short: "Write a trace as the reference RLM implementation's JSONL log (its visualizer reads it)",
		Long: `Write a trace as the JSONL log of the reference RLM implementation
(alexzhang13/rlm, what its RLMLogger writes and its visualizer and training
pipelines read): a metadata line, then one line per turn of the root loop
with its prompt, reply and code blocks; child loops are nested in the
sub-calls that started them.

What the reference's log has no field for (usage and latency per call,
node numbers, how the answer was given) is kept under an "rlm" key, which
the reference ignores and rlm trace import reads back. Note that the
reference counts depth differently: its max_depth is rlm's --max-depth + 1.`,
		Example: `  rlm run task.toml --trace run.jsonl
  rlm trace export --format reference run.jsonl > rlm_run.jsonl
  rlm trace export --format reference run.jsonl -o logs/rlm_run.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != FormatReference {
				return cmdutil.Usagef("--format %q: the only export format is %q (the reference implementation's log)", format, FormatReference)
			}
			evs, rep, err := Load(args[0])
			if err != nil {
				return cmdutil.Usage(err)
			}
			if err := reftrace.Exportable(evs); err != nil {
				return cmdutil.Usage(fmt.Errorf("%s: %w", args[0], err))
			}
			warnIncomplete(f.IO.ErrOut, args[0], rep)
			return writeOut(f, out, "rlm_run.jsonl", func(w io.Writer) error { return reftrace.Export(w, evs) })
		},
	}
	cmd.Flags().StringVar(&format, "format", FormatReference, "the format to write: reference")
	cmd.Flags().StringVarP(&out, "output", "o", "", "the file to write (default: stdout)")
	return cmd
}

// NewCmdImport builds `rlm trace import`.
func NewCmdImport(f *cmdutil.Factory) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "import LOG.jsonl [-o TRACE.jsonl]",
		Short: "Turn a reference RLM implementation's JSONL log into an rlm trace (show, view, replay)",
		Long: `Turn a log of the reference RLM implementation (alexzhang13/rlm's
RLMLogger, or rlm trace export) into an rlm trace: rlm trace show and rlm
trace view display it (they also read such a log directly), and the replay
provider answers from it:

  rlm trace import log.jsonl -o run.jsonl
  rlm run --task ... --context ... --provider replay --transcript run.jsonl

A log the reference wrote has no usage for the root model's turns (it
does not record them): they count as 0 tokens. A block's stderr is shown
as its error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			evs, err := importFile(args[0])
			if err != nil {
				return cmdutil.Usage(err)
			}
			return writeOut(f, out, "run.jsonl", func(w io.Writer) error {
				enc := json.NewEncoder(w)
				enc.SetEscapeHTML(false)
				for _, ev := range evs {
					if err := enc.Encode(ev); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the file to write (default: stdout)")
	return cmd
}

// writeOut writes to path ("" or "-": stdout) through a buffer.
func writeOut(f *cmdutil.Factory, path, example string, write func(io.Writer) error) error {
	if path == "" || path == "-" {
		w := bufio.NewWriter(f.IO.Out)
		if err := write(w); err != nil {
			return err
		}
		return w.Flush()
	}
	if err := cmdutil.CheckOutputFile("-o", path, example); err != nil {
		return err
	}
	file, err := os.Create(path)
	if err != nil {
		return cmdutil.Usage(err)
	}
	w := bufio.NewWriter(file)
	if err := write(w); err != nil {
		file.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

// importFile reads a reference log and returns its events.
func importFile(path string) ([]engine.Event, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the log: %w", err)
	}
	defer file.Close()
	l, err := reftrace.Read(file)
	if err != nil {
		return nil, fmt.Errorf("%s is not a reference RLM log: %w", path, err)
	}
	return reftrace.Import(l), nil
}

// isReferenceLog says whether the file's first line is a line of the
// reference's log (a "metadata" or "iteration" object) rather than an rlm
// trace event.
func isReferenceLog(path string) bool {
	file, err := os.Open(path)
	if err != nil {
		return false
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 1<<16), 256<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var probe struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &probe) != nil {
			return false
		}
		return probe.Type == reftrace.TypeMetadata || probe.Type == reftrace.TypeIteration
	}
	return false
}

// loadReference reads a reference log as a trace, for show and view.
func loadReference(path string) ([]engine.Event, traceview.Report, error) {
	evs, err := importFile(path)
	if err != nil {
		return nil, traceview.Report{}, err
	}
	return evs, traceview.Report{Events: len(evs), Ended: true}, nil
}
