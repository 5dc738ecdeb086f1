package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rlmkit/rlm/core"
)

// SystemPrompt is the default system prompt of every loop. It explains the
// REPL, the helpers and how to finish; the task and a description of
// `context` come in the first user message (see [FirstMessage]), so the
// system prompt is the same for every run and depth.
const SystemPrompt = `You are a Recursive Language Model. You answer a task about a context that may be far too large to read at once. You never see the context directly: it is stored in a Python REPL, and you explore it by writing code.

## The REPL
Write Python in fenced blocks tagged repl:

` + "```repl" + `
print(len(context))
print(context[:500])
` + "```" + `

Every block in your reply is run in order, in the same interpreter; variables, imports and functions persist between blocks and between turns. You see what a block prints (long output is cut in the middle, so print summaries and slices, not whole documents). After each of your replies you get the output and write your next step.

## What the REPL provides
- context: the input (its type and size are given below). Inspect it in slices; never print it whole.
- chunk_text(text, size=2000, overlap=200) -> list[str]: split a string into overlapping chunks.
- search_context(pattern, window=200, flags=0, max_results=None) -> list[dict]: regex search over context; each hit has match, start, end, snippet (the match with window characters either side) and snippet_start.
- llm_query(prompt, model=None) -> str: ask a language model one question. It does not see context or your variables: put the text it needs into the prompt (a chunk of tens of thousands of characters is fine).
- llm_query_batched(prompts, model=None) -> list[str]: several llm_query calls at once, run concurrently; much faster than a loop. A prompt that failed has an LLMQueryError in its place (check with isinstance); the others keep their answers.
- rlm_query(task, ctx=None, model=None) -> str: hand a sub-task to a recursive copy of yourself with its own REPL whose context is ctx (default: the current context). Use it for sub-problems that need exploration of their own; use llm_query for plain questions about a piece of text.
- rlm_query_batched(tasks, ctxs=None, model=None) -> list[str]: several rlm_query calls at once.
- SHOW_VARS(): list the variables you have defined.

## Strategy
Look before you leap: check the type, the length and a sample of context first. Then narrow down with code (search, filter, count, parse) and use llm_query on the pieces that need reading comprehension. Combine the partial results in variables. Compute what can be computed with code rather than asking a model.

## Finishing
When you know the answer, reply with one of these on a line of its own, outside any code block:
FINAL(your answer)
FINAL_VAR(variable_name)
FINAL_VAR returns the value of a REPL variable you have already set (use it for long or computed answers). FINAL(...) and FINAL_VAR(...) also work as calls inside a repl block, as does setting answer["content"] = ... and then answer["ready"] = True. Do not finish before you have checked the answer against the context.`

// FirstMessage is the first user message of a loop: the task and what
// `context` holds.
func FirstMessage(task string, info CtxInfo, depth int) string {
	var b strings.Builder
	if depth > 0 {
		fmt.Fprintf(&b, "You are a sub-task at recursion depth %d, started by another instance of yourself with rlm_query. Answer only this sub-task.\n\n", depth)
	}
	b.WriteString("Task: ")
	b.WriteString(task)
	b.WriteString("\n\n")
	b.WriteString(describeContext(info))
	b.WriteString("\n\nStart by looking at the context with a ```repl block. Do not answer yet.")
	return b.String()
}

func describeContext(info CtxInfo) string {
	if info.Kind == "none" {
		return "There is no context: `context` is None. Use the REPL for any computation the task needs."
	}
	s := fmt.Sprintf("The REPL variable `context` holds the input: %s of %d characters.", info.Type, info.Chars)
	switch {
	case info.Chars > 100_000:
		n := (info.Chars + 49_999) / 50_000
		s += fmt.Sprintf(" That is too much to read or to send to llm_query in one piece: search it, or split it (for example chunk_text(context, 50000, 500) gives about %d chunks) and process the chunks, ideally with llm_query_batched.", n)
	case info.Chars > 10_000:
		s += " Inspect it in slices rather than printing it whole."
	}
	return s
}

// describe builds the CtxInfo of c.
func describe(c *core.Context) CtxInfo {
	if c == nil {
		return CtxInfo{Kind: "none", Type: "None"}
	}
	sum := sha256.Sum256(c.Data)
	info := CtxInfo{Kind: c.Kind, Chars: utf8.RuneCount(c.Data), SHA256: hex.EncodeToString(sum[:])}
	if info.Kind == "" {
		info.Kind = "text"
	}
	if info.Kind != "json" {
		info.Type = "a str"
		return info
	}
	trimmed := bytes.TrimSpace(c.Data)
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		var items []json.RawMessage
		if json.Unmarshal(trimmed, &items) == nil {
			info.Type = fmt.Sprintf("a list of %d items, decoded from JSON text", len(items))
			return info
		}
	case len(trimmed) > 0 && trimmed[0] == '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(trimmed, &m) == nil {
			info.Type = fmt.Sprintf("a dict of %d keys, decoded from JSON text", len(m))
			return info
		}
	}
	info.Type = "a value decoded from JSON text"
	return info
}

// Messages the loop sends besides code output.
const (
	noCodeMessage = "Your reply had no ```repl block and no FINAL(...) or FINAL_VAR(...) line. Continue exploring the context with a ```repl block, or give your answer with FINAL(answer) on a line of its own."
	forcedMessage = "You have no turns left (%s). Do not write more code. Reply now with your best final answer, based on what you have found so far, as FINAL(answer) or FINAL_VAR(variable_name) on a line of its own."
)
