package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Tools are the functions the operator gives every loop of a run besides
// the REPL's own helpers: Python source preloaded into each loop's REPL,
// and host-side tools the REPL calls through the session's callback
// channel. Every loop gets them, children started by rlm_query included,
// and the system prompt lists them (signature and docstring), so the model
// knows they exist without spending a turn on finding out.
//
// # Notes
//
// The operator chooses the tools, never the model: a host-side tool runs
// outside the sandbox with the rights of the process that runs rlm, so it
// is as trusted as that process. What the model controls is only the
// arguments, which reach the tool as JSON data (a command's stdin, an HTTP
// body), never as a command line.
type Tools struct {
	// Files are Python source files run in every loop's REPL before the
	// model's first turn (and again after a restart of the REPL).
	Files []ToolFile
	// Host are the host-side tools.
	Host []HostTool
}

// ToolFile is one Python source file of [Tools]. Its public top-level
// functions are listed in the system prompt; a top-level name that would
// hide a REPL helper, `context`, the answer helpers or a Python builtin is
// refused before the first model call ([ErrTools]).
type ToolFile struct {
	// Path names the file in messages and tracebacks.
	Path string
	// Source is its Python text.
	Source string
}

// HostTool is a tool that runs on the host: a command or an HTTP
// endpoint. The REPL gets a Python function of the same name; its
// arguments (positional ones named by Params) are sent as one JSON object,
// and its answer comes back as the JSON value the tool printed or
// returned (or as a str when that is not JSON). Failures, a timeout and a
// used-up MaxCalls are ToolError exceptions in the cell.
type HostTool struct {
	// Name is the Python function's name.
	Name string
	// Description tells the model what the tool does (system prompt, and
	// the function's docstring).
	Description string
	// Params names the positional arguments, in order; keyword arguments
	// are sent as they are.
	Params []string
	// Command is run once per call with the arguments as JSON on stdin;
	// what it prints on stdout is the answer, and a non-zero exit status
	// is an error (stderr says why).
	Command []string
	// Dir is the command's working directory ("": the current one).
	Dir string
	// URL receives the arguments as a JSON POST; a 2xx response's body is
	// the answer.
	URL string
	// Func answers in the host process itself: a library user's Go
	// function, or a tool of an MCP server (rlm run's [[mcp]]). args is
	// the JSON object; its error is the ToolError's message. Exactly one
	// of Command, URL and Func is set.
	Func func(ctx context.Context, args json.RawMessage) ([]byte, error)
	// Timeout bounds one call (default [DefaultToolTimeout]).
	Timeout time.Duration
	// MaxCalls caps the calls of the whole run, every loop together
	// (0: no cap).
	MaxCalls int
}

// Defaults and bounds of host-side tools.
const (
	DefaultToolTimeout = 60 * time.Second
	// MaxToolOutput bounds what one call may answer; more is an error.
	MaxToolOutput = 8 << 20
)

// ErrTools matches (errors.Is) a run that could not start because its
// tools are wrong: a Python file that fails to load, or a name it may not
// define. The error says which file and name, and what to change.
var ErrTools = errors.New("tools")

// ReservedNames are the REPL names a tool may not take: the helpers, the
// input and the ways to finish. Python's builtins (print, len, ...) are
// refused as well.
var ReservedNames = []string{
	"context", "llm_query", "llm_query_batched", "rlm_query", "rlm_query_batched",
	"chunk_text", "search_context", "SHOW_VARS", "LLMQueryError", "ToolError",
	"FINAL", "FINAL_VAR", "answer", "history",
}

var (
	identifier = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	paramName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// pythonKeywords cannot be function names.
	pythonKeywords = []string{"False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
		"continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in",
		"is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield"}
)

// IsPythonName says whether name can be a Python variable: an identifier
// that is not a keyword (rlm run --var names, tool parameters).
func IsPythonName(name string) bool {
	return paramName.MatchString(name) && !slices.Contains(pythonKeywords, name)
}

// check validates the host tools' declarations and fills in defaults.
// Python files are checked in the REPL, where Python reads them.
func (t *Tools) check() error {
	t.Host = slices.Clone(t.Host) // defaults are filled in on the engine's copy, not the caller's
	seen := map[string]bool{}
	for i := range t.Host {
		h := &t.Host[i]
		what := fmt.Sprintf("tool %q", h.Name)
		switch {
		case h.Name == "":
			return fmt.Errorf("%w: tool %d has no name: give it name = \"...\", the Python function the REPL calls", ErrTools, i+1)
		case !identifier.MatchString(h.Name) || slices.Contains(pythonKeywords, h.Name):
			return fmt.Errorf("%w: %s: a tool's name must be a Python identifier (letters, digits, _; not starting with _ or a digit; not a keyword)", ErrTools, what)
		case slices.Contains(ReservedNames, h.Name):
			return fmt.Errorf("%w: %s: the REPL reserves that name (%s): choose another", ErrTools, what, strings.Join(ReservedNames, ", "))
		case seen[h.Name]:
			return fmt.Errorf("%w: %s is declared twice: tool names must differ", ErrTools, what)
		case sources(h) != 1:
			return fmt.Errorf("%w: %s: give it exactly one of command = [\"program\", \"arg\", ...] and url = \"http://...\"", ErrTools, what)
		case h.Timeout < 0 || h.MaxCalls < 0:
			return fmt.Errorf("%w: %s: timeout and max_calls must not be negative", ErrTools, what)
		}
		if h.URL != "" && !strings.HasPrefix(h.URL, "http://") && !strings.HasPrefix(h.URL, "https://") {
			return fmt.Errorf("%w: %s: url %q must start with http:// or https://", ErrTools, what, h.URL)
		}
		for _, p := range h.Params {
			if !paramName.MatchString(p) || slices.Contains(pythonKeywords, p) {
				return fmt.Errorf("%w: %s: parameter %q is not a Python identifier", ErrTools, what, p)
			}
		}
		if h.Timeout == 0 {
			h.Timeout = DefaultToolTimeout
		}
		seen[h.Name] = true
	}
	return nil
}

// sources counts how many of Command, URL and Func h has.
func sources(h *HostTool) int {
	n := 0
	for _, set := range []bool{len(h.Command) > 0, h.URL != "", h.Func != nil} {
		if set {
			n++
		}
	}
	return n
}

func (t *Tools) empty() bool { return len(t.Files) == 0 && len(t.Host) == 0 }

func (t *Tools) host(name string) *HostTool {
	for i := range t.Host {
		if t.Host[i].Name == name {
			return &t.Host[i]
		}
	}
	return nil
}

// toolsRun is a run's state of its tools: the prompt section (from the
// root loop's REPL, which reads the Python files first) and the calls each
// host tool has made.
type toolsRun struct {
	mu     sync.Mutex
	prompt string
	calls  map[string]int
}

// reserve takes one call of tool t's MaxCalls budget.
func (tr *toolsRun) reserve(t *HostTool) error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.calls == nil {
		tr.calls = map[string]int{}
	}
	if t.MaxCalls > 0 && tr.calls[t.Name] >= t.MaxCalls {
		return fmt.Errorf("tool %s: its budget of %d calls for this run is used up (max_calls): go on without it", t.Name, t.MaxCalls)
	}
	tr.calls[t.Name]++
	return nil
}

// system is the loops' system prompt: the configured one and the tools.
func (r *run) system() string {
	r.tools.mu.Lock()
	defer r.tools.mu.Unlock()
	return r.o.SystemPrompt + r.tools.prompt
}

// toolsMarker starts the line the loading cell reports on.
const toolsMarker = "<<rlm-tools>>"

// loadToolsCode defines the tools in the REPL of the cell it runs in and
// prints one line: toolsMarker then JSON, {"tools": [...]} (the Python
// files' public functions: name, signature, doc, file) or {"error": "..."}.
// A name is a file's when running the file bound it to a new object; the
// first file to define a function owns it.
const loadToolsCode = `def _rlm_tools_load(payload):
    import base64, builtins, inspect, json, traceback
    spec = json.loads(base64.b64decode(payload).decode("utf-8"))
    ns = globals()
    builtin = {k for k in dir(builtins) if not k.startswith("_")}
    reserved = set(spec["reserved"])
    host = {t["name"] for t in spec["host"]}
    owner, described = {}, []

    def report(v):
        builtins.print("\n" + spec["marker"] + json.dumps(v))

    for f in spec["files"]:
        path, before = f["path"], dict(ns)
        try:
            exec(compile(f["source"], path, "exec"), ns)
        except SyntaxError as e:
            return report({"error": "%s: line %s: syntax error: %s" % (path, e.lineno, e.msg)})
        except (Exception, SystemExit) as e:
            lines = [fr.lineno for fr in traceback.extract_tb(e.__traceback__) if fr.filename == path]
            where = (" line %d" % lines[-1]) if lines else ""
            return report({"error": "%s:%s: running it raised %s: %s" % (path, where, type(e).__name__, e)})
        for k, v in list(ns.items()):
            if k.startswith("_") or (k in before and before[k] is v):
                continue
            why = None
            if k in reserved:
                why = "the REPL reserves that name (%s)" % ", ".join(spec["reserved"])
            elif k in builtin:
                why = "it would hide the Python builtin %s" % k
            elif k in host:
                why = "the task file declares a host tool of that name"
            elif k in owner and owner[k] != path and inspect.isfunction(v):
                why = "%s defines it too" % owner[k]
            if why:
                return report({"error": "%s defines %s, but %s: rename it" % (path, k, why)})
            owner.setdefault(k, path)
            if inspect.isfunction(v) and v.__code__.co_filename == path:
                try:
                    sig = str(inspect.signature(v))
                except (TypeError, ValueError):
                    sig = "(...)"
                described.append({"name": k, "signature": sig, "doc": inspect.getdoc(v) or "", "file": path})
            elif not (callable(v) or inspect.ismodule(v)):
                described.append({"name": k, "type": type(v).__name__, "file": path})
    for t in spec["host"]:
        if t["name"] in builtin:
            return report({"error": "tool %s would hide the Python builtin %s: rename it" % (t["name"], t["name"])})
        ns[t["name"]] = _rlm_tools_stub(t)
    _rlm_helpers_hide(list(owner) + sorted(host))
    report({"tools": described})


def _rlm_tools_stub(t):
    name, params = t["name"], t["params"]

    def tool(*args, **kwargs):
        extra = {}
        if len(args) == len(params) + 1 and isinstance(args[-1], dict):
            args, extra = args[:-1], args[-1]
        if len(args) > len(params):
            raise TypeError("%s() takes %d positional arguments (%s) but %d were given; pass the others by keyword" % (name, len(params), ", ".join(params), len(args)))
        payload = dict(zip(params, args))
        for more in (extra, kwargs):
            for k in more:
                if k in payload:
                    raise TypeError("%s() got multiple values for argument %r" % (name, k))
            payload.update(more)
        return _rlm_tool_call(name, payload)

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = t["description"]
    return tool


try:
    _rlm_tools_load("PAYLOAD")
finally:
    del _rlm_tools_load, _rlm_tools_stub
`

// toolsSpec is what loadToolsCode reads.
type toolsSpec struct {
	Marker   string     `json:"marker"`
	Reserved []string   `json:"reserved"`
	Files    []toolFile `json:"files"`
	Host     []hostSpec `json:"host"`
}

type toolFile struct {
	Path   string `json:"path"`
	Source string `json:"source"`
}

type hostSpec struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Params      []string `json:"params"`
}

// described is one Python tool function, or data value (Type set), as
// the REPL reports it.
type described struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Signature string `json:"signature"`
	Doc       string `json:"doc"`
	File      string `json:"file"`
}

// loadCode renders the loading cell.
func (t *Tools) loadCode() string {
	spec := toolsSpec{Marker: toolsMarker, Reserved: ReservedNames, Files: []toolFile{}, Host: []hostSpec{}}
	for _, f := range t.Files {
		spec.Files = append(spec.Files, toolFile(f))
	}
	for _, h := range t.Host {
		spec.Host = append(spec.Host, hostSpec{Name: h.Name, Description: h.Description, Params: append([]string{}, h.Params...)})
	}
	b, _ := json.Marshal(spec)
	// base64 keeps any source text out of Python's string syntax.
	return strings.Replace(loadToolsCode, "PAYLOAD", base64.StdEncoding.EncodeToString(b), 1)
}

// loadTools defines the tools in the node's REPL. The root loop's report
// becomes the system prompt's tools section.
func (n *node) loadTools() error {
	t := &n.r.o.Tools
	if t.empty() {
		return nil
	}
	res, err := n.sess.Execute(n.ctx, t.loadCode(), 0)
	if err != nil {
		if n.ctx.Err() != nil {
			return n.ctx.Err()
		}
		return &failure{kind: ErrSandbox, msg: fmt.Sprintf("loading the tools (depth %d)", n.depth), err: err}
	}
	var rep struct {
		Tools []described `json:"tools"`
		Error string      `json:"error"`
	}
	_, line, found := strings.Cut(res.Stdout, "\n"+toolsMarker)
	if !found {
		_, line, found = strings.Cut(res.Stdout, toolsMarker)
	}
	if found {
		line, _, _ = strings.Cut(line, "\n")
		if err := json.Unmarshal([]byte(line), &rep); err != nil {
			found = false
		}
	}
	switch {
	case rep.Error != "":
		return fmt.Errorf("%w: %s", ErrTools, rep.Error)
	case !found:
		why := res.Error
		if why == "" {
			why = fmt.Sprintf("the REPL did not report on them (ended by %s)", res.EndedBy)
		}
		return fmt.Errorf("%w: loading the tools failed: %s", ErrTools, why)
	}
	if n.depth == 0 {
		n.r.tools.mu.Lock()
		n.r.tools.prompt = t.prompt(rep.Tools)
		n.r.tools.mu.Unlock()
	}
	return nil
}

// prompt is the system prompt's section on the tools.
func (t *Tools) prompt(py []described) string {
	var b strings.Builder
	b.WriteString("\n\n## Tools\nThese functions and values are already defined in the REPL (and in the REPL of every rlm_query sub-task); call them from ```repl blocks like any Python function.\n")
	for _, d := range py {
		if d.Type != "" {
			fmt.Fprintf(&b, "- %s: a %s value\n", d.Name, d.Type)
			continue
		}
		fmt.Fprintf(&b, "- %s%s", d.Name, d.Signature)
		if doc := strings.TrimSpace(d.Doc); doc != "" {
			b.WriteString(": ")
			b.WriteString(strings.ReplaceAll(doc, "\n", "\n  "))
		}
		b.WriteByte('\n')
	}
	for _, h := range t.Host {
		sig := strings.Join(h.Params, ", ")
		if sig == "" {
			sig = "**kwargs"
		}
		fmt.Fprintf(&b, "- %s(%s)", h.Name, sig)
		if d := strings.TrimSpace(h.Description); d != "" {
			b.WriteString(": ")
			b.WriteString(strings.ReplaceAll(d, "\n", "\n  "))
		}
		b.WriteString("\n  (runs outside the REPL: arguments and result are JSON values; a failure raises ToolError")
		if h.MaxCalls > 0 {
			fmt.Fprintf(&b, "; max_calls %d for this whole run", h.MaxCalls)
		}
		b.WriteString(")\n")
	}
	return strings.TrimRight(b.String(), "\n")
}
