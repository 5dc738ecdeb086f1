package engine

import (
	"fmt"
)

// Protocols a run speaks with its model (Options.Protocol).
//
// rlm's own (the seeds): the model finishes with FINAL(answer) or
// FINAL_VAR(name), hands sub-tasks to rlm_query(task, ctx=None), and
// MaxDepth counts the levels of child loops (0: none).
//
// The reference implementation's (alexzhang13/rlm since 2026-05-13, which
// checkpoints such as rlm-qwen3-30b-a3b were trained on): the model
// finishes with answer["content"] = ...; answer["ready"] = True, calls
// rlm_query(prompt, model=None) whose child explores the prompt itself,
// gets a str from SHOW_VARS(), and a query that fails returns a str
// beginning "Error: " rather than raising. Past the maximum depth
// rlm_query is one plain model call on the prompt, as the reference's
// RLM at max_depth "is an LM". MaxDepth keeps rlm's meaning inside the
// engine; the CLI turns the reference's max_depth (which counts the root:
// 1 is no recursion) into it.
//
// Either protocol takes the other's finishing moves (FINAL, the answer
// dict) and rlm_query's model= keyword, so code written for one runs in
// both; docs/protocols.md tables the differences.
const (
	ProtocolRLM       = "rlm"
	ProtocolReference = "reference"
)

// CheckProtocol refuses a protocol name other than the two.
func CheckProtocol(p string) error {
	switch p {
	case "", ProtocolRLM, ProtocolReference:
		return nil
	}
	return fmt.Errorf("unknown protocol %q: use %q (FINAL, rlm_query(task, ctx)) or %q (the reference implementation's answer dict, rlm_query(prompt, model))", p, ProtocolRLM, ProtocolReference)
}

func (r *run) reference() bool { return r.o.Protocol == ProtocolReference }

// protocolCode tells the REPL's helpers (plugins/internal/pycell) which
// protocol the loop speaks: they read _rlm_protocol for rlm_query's
// positional arguments, SHOW_VARS' return and how a failed query reports.
const protocolCode = `_rlm_protocol = "reference"
`

// setProtocol runs protocolCode in the loop's REPL when the run speaks the
// reference protocol (at the start, and again after a restart).
func (n *node) setProtocol() error {
	if !n.r.reference() {
		return nil
	}
	if _, err := n.sess.Execute(n.ctx, protocolCode, 0); err != nil {
		if n.ctx.Err() != nil {
			return n.ctx.Err()
		}
		return &failure{kind: ErrSandbox, msg: fmt.Sprintf("setting the reference protocol in the REPL (depth %d)", n.depth), err: err}
	}
	return nil
}

// ReferenceSystemPrompt is the system prompt of a loop that speaks the
// reference protocol: rlm's own wording of the reference's contract.
const ReferenceSystemPrompt = `You are tasked with answering a query with associated context. You can access, transform, and analyze this context interactively in a REPL environment that can recursively query sub-LLMs, which you are strongly encouraged to use as much as possible. You will be queried iteratively until you provide a final answer.

The REPL environment is initialized with:
1. A ` + "`context`" + ` variable that contains extremely important information about your query. Look through it in slices (print summaries, never the whole of it) to understand what you are working with.
2. A ` + "`llm_query(prompt, model=None)`" + ` function that asks a sub-LLM one question; it sees only the prompt you pass it, which can hold a large chunk of text.
3. A ` + "`llm_query_batched(prompts, model=None)`" + ` function that runs several prompts concurrently and returns their answers in order.
4. A ` + "`rlm_query(prompt, model=None)`" + ` function that hands a sub-task to a recursive RLM with a REPL of its own, whose context is the prompt; ` + "`rlm_query_batched(prompts, model=None)`" + ` runs several.
5. A ` + "`SHOW_VARS()`" + ` function that returns the variables you have created.
6. An ` + "`answer`" + ` dict: set ` + "`answer[\"content\"]`" + ` to your answer and ` + "`answer[\"ready\"] = True`" + ` to finish.
7. The ability to use ` + "`print()`" + ` to view the output of your code and continue your reasoning.

A failed query returns a string that starts with "Error: ".

Write Python in fenced blocks tagged repl:
` + "```repl" + `
chunk = context[:10000]
summary = llm_query(f"Summarize this part of the document:\n{chunk}")
print(summary)
` + "```" + `
Variables persist between blocks and turns. Split large contexts into chunks, query sub-LLMs on them (batched when you can), and combine the results in variables.

When you are done, finish from a repl block:
` + "```repl" + `
answer["content"] = final_result
answer["ready"] = True
` + "```" + `
Keep answer["content"] up to date as you go: if the run is cut short, what it holds is returned as a partial answer. Do not finish before you have checked the answer against the context.`
