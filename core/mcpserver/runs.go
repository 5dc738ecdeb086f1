package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/server"
)

// rlm_run: an RLM loop on the server (server.Server.StartRun, what POST
// /runs starts), offered only by a server that has a model
// (server.RunsEnabled). The client's progress token gets one
// notifications/progress a step (iteration, model call, code block,
// sub-call, answer), so a long run shows it is alive; over stateless HTTP
// there is no stream to send them on and the tool simply answers at the
// end. notifications/cancelled (or an HTTP client hanging up) cancels the
// run: the call's context is the run's.

// RunInput are rlm_run's arguments: POST /runs' body.
type RunInput struct {
	Task           string   `json:"task" jsonschema:"the question or task; the model sees it, never the context itself"`
	Context        any      `json:"context,omitempty" jsonschema:"the input the model explores with code: a string, or any JSON value (a list or object becomes a Python list or dict)"`
	Model          string   `json:"model,omitempty" jsonschema:"the model driving the loop, among those the server allows (default: the server's)"`
	SubcallModel   string   `json:"subcall_model,omitempty" jsonschema:"the model answering llm_query (default: model)"`
	MaxIterations  *int     `json:"max_iterations,omitempty" jsonschema:"model turns per loop before a best answer is asked for"`
	MaxDepth       *int     `json:"max_depth,omitempty" jsonschema:"deepest rlm_query recursion; 0 disables it"`
	MaxErrors      *int     `json:"max_errors,omitempty" jsonschema:"failed code blocks in a row before a best answer is asked for"`
	MaxTokens      *int64   `json:"max_tokens,omitempty" jsonschema:"token cap of the whole run, sub-calls included (at most the server's)"`
	MaxCostUSD     *float64 `json:"max_cost_usd,omitempty" jsonschema:"cost cap of the whole run in US dollars (at most the server's)"`
	MaxTimeSeconds *float64 `json:"max_time_seconds,omitempty" jsonschema:"wall-time cap of the whole run in seconds (at most the server's)"`
}

// runInstructions adds rlm_run to the server's instructions when it is
// offered.
func runInstructions(srv *server.Server) string {
	if !srv.RunsEnabled() {
		return ""
	}
	return " For a question about a context too large to read (a long document, a log, many files' text), rlm_run has the server's model answer it with a Recursive Language Model: it explores the context with code and sub-queries, and returns the answer and its usage."
}

func addRunTool(ms *mcp.Server, t *tools) {
	yes := true
	mcp.AddTool(ms, &mcp.Tool{
		Name: "rlm_run",
		Description: "Answer a task about a (possibly huge) context with a Recursive Language Model: the server's model explores the context with Python code in a sandboxed REPL " +
			"(the variable context), asks sub-questions with llm_query, hands sub-tasks to copies of itself with rlm_query, and gives its answer. " +
			"Returns the answer, how it was given (answer_source) and the usage; a run that ends without an answer is reported with isError and why (error_kind, error). " +
			"Send a progress token to follow the run step by step.",
		Annotations: &mcp.ToolAnnotations{Title: "Run a Recursive Language Model", OpenWorldHint: &yes},
	}, t.rlmRun)
}

func (t *tools) rlmRun(ctx context.Context, req *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, *server.RunStatus, error) {
	rr := &server.RunRequest{Task: in.Task, Model: in.Model, SubcallModel: in.SubcallModel,
		MaxIterations: in.MaxIterations, MaxDepth: in.MaxDepth, MaxErrors: in.MaxErrors,
		MaxTokens: in.MaxTokens, MaxCostUSD: in.MaxCostUSD, MaxTimeSeconds: in.MaxTimeSeconds}
	if in.Context != nil {
		b, err := json.Marshal(in.Context)
		if err != nil {
			return nil, nil, fmt.Errorf("context: %v", err)
		}
		rr.Context = b
	}
	run, err := t.srv.StartRun(ctx, rr)
	if err != nil {
		return nil, nil, err
	}
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		n := 0
		note := func(msg string) {
			n++
			// A notification that cannot be sent (the client went away)
			// is no reason to stop: the run's context says whether to.
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: msg})
		}
		note("run " + run.ID() + " started")
		_ = run.Follow(ctx, func(ev engine.Event) error {
			if msg := progressMessage(ev); msg != "" {
				note(msg)
			}
			return nil
		})
	}
	// The run ends with the call's context, so this wait is short once
	// the client has cancelled.
	<-run.Done()
	st := run.Status()
	res := text(runSummary(&st))
	res.IsError = st.Status != server.RunSucceeded
	return res, &st, nil
}

// progressMessage is one step of a run as a progress message ("" for the
// events that are not steps).
func progressMessage(ev engine.Event) string {
	where := ""
	if ev.Depth > 0 {
		where = fmt.Sprintf(" (child %d, depth %d)", ev.Node, ev.Depth)
	}
	switch ev.Type {
	case engine.EventIteration:
		return fmt.Sprintf("iteration %d%s", ev.Iteration, where)
	case engine.EventLLMCall:
		tok := int64(0)
		if ev.Totals != nil {
			tok = ev.Totals.Tokens()
		}
		model := ""
		if ev.Request != nil {
			model = ev.Request.Model
		}
		return fmt.Sprintf("%s call to %s answered%s; %d tokens so far", ev.Caller, model, where, tok)
	case engine.EventCode:
		ended := ""
		if ev.Result != nil {
			ended = string(ev.Result.EndedBy)
		}
		return fmt.Sprintf("code block %d of iteration %d ran (%s)%s", ev.Block, ev.Iteration, ended, where)
	case engine.EventSubcall:
		return fmt.Sprintf("%s called from code%s", ev.Kind, where)
	case engine.EventBudgetWarning, engine.EventWarning:
		return "warning: " + ev.Message
	case engine.EventFinal:
		return fmt.Sprintf("answer found (%s)%s", ev.Source, where)
	}
	return ""
}

// runSummary is a run's outcome for a reader: the answer, or why there is
// none, then the usage.
func runSummary(st *server.RunStatus) string {
	u := st.Usage
	usage := fmt.Sprintf("run %s, %d iterations, %d model calls, %d tokens, %s", st.ID, u.Iterations, u.Calls, u.Tokens(), u.CostText())
	if st.Status != server.RunSucceeded {
		return fmt.Sprintf("no answer: the run %s (%s): %s\n\n[%s]", st.Status, st.ErrorKind, st.Error, usage)
	}
	note := ""
	if st.NoFinal {
		note = "; the forced answer had no FINAL: this is the model's whole last reply"
	}
	return fmt.Sprintf("%s\n\n[answer_source %s%s; %s]", st.Answer, st.AnswerSource, note, usage)
}
