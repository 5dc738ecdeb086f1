// rlm-client for JavaScript and TypeScript: the twin of clients/python.
// new RLM({...}).completion(prompt, rootPrompt) runs one Recursive Language
// Model loop on a `rlm serve` (POST /runs, its events read as NDJSON as they
// come) and resolves to the reference implementation's RLMChatCompletion
// shape, as clients/python's to_dict() gives it: { root_model, prompt,
// response, usage_summary: { model_usage_summaries }, execution_time,
// metadata }. Options keep the reference's names. No dependencies: Node 18+
// (fetch), Deno, Bun or a browser.

export class RLMError extends Error {
  constructor(message, kind = "internal", status = {}) {
    super(message);
    this.name = "RLMError";
    this.kind = kind;
    this.status = status;
  }
}

// rlm serve refused the request or could not be reached.
export class ServerError extends RLMError {
  constructor(message, httpStatus = 0, code = "") {
    super(message, "server");
    this.name = "ServerError";
    this.httpStatus = httpStatus;
    this.code = code;
  }
}

export class TokenLimitExceededError extends RLMError {
  constructor(message, tokensUsed, tokenLimit, status) {
    super(message, "budget", status);
    this.name = "TokenLimitExceededError";
    this.tokens_used = tokensUsed;
    this.token_limit = tokenLimit;
  }
}

export class BudgetExceededError extends RLMError {
  constructor(message, spent, budget, status) {
    super(message, "budget", status);
    this.name = "BudgetExceededError";
    this.spent = spent;
    this.budget = budget;
  }
}

export class TimeoutExceededError extends RLMError {
  constructor(message, elapsed, timeout, status) {
    super(message, "budget", status);
    this.name = "TimeoutExceededError";
    this.elapsed = elapsed;
    this.timeout = timeout;
  }
}

export class CancellationError extends RLMError {
  constructor(message, status) {
    super(message, "cancelled", status);
    this.name = "CancellationError";
  }
}

const DEFAULT_TASK = "The prompt to respond to is in the REPL variable `context`: read it, and answer it as its recipient would.";
const env = (name) => (typeof process !== "undefined" ? process.env[name] : undefined);

export class RLM {
  constructor(opts = {}) {
    const {
      backend_kwargs = {}, other_backend_kwargs, max_depth = 1, max_iterations = 30, max_budget, max_timeout, max_tokens, max_errors,
      base_url = env("RLM_URL"), token = env("RLM_TOKEN"), on_event, on_iteration_start, keep_events = false, ...rest
    } = opts;
    for (const [name, value] of Object.entries(rest)) {
      if (["backend", "environment", "environment_kwargs", "other_backends", "verbose"].includes(name)) continue;
      if (value === undefined || value === null || value === false) continue;
      throw new TypeError(`RLM({${name}}): not offered by rlm-client (see clients/python/README.md for what rlm offers instead)`);
    }
    if (!base_url) throw new ServerError("no rlm serve to talk to: give RLM({base_url}) or set $RLM_URL (start one with `rlm serve --provider ...`)", 0, "unreachable");
    if (max_depth < 1) throw new RangeError(`RLM({max_depth: ${max_depth}}): the reference answers with a plain model call below 1; rlm runs every completion as an RLM loop: use 1 (no recursion) or more`);
    Object.assign(this, { backend_kwargs, other_backend_kwargs, max_depth, max_iterations, max_budget, max_timeout, max_tokens, max_errors, on_event, on_iteration_start, keep_events });
    this.base_url = base_url.replace(/\/+$/, "");
    this.token = token;
    this.run_id = undefined;
  }

  #headers(json) {
    const h = { Accept: "application/x-ndjson, application/json" };
    if (json) h["Content-Type"] = "application/json";
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    return h;
  }

  #body(prompt, rootPrompt) {
    // rlm runs the reference's protocol for this client, with its
    // max_depth (which counts the root: 1 is no recursion).
    const body = { task: rootPrompt || DEFAULT_TASK, context: prompt, protocol: "reference", max_depth: this.max_depth, max_iterations: this.max_iterations };
    if (this.backend_kwargs.model_name) body.model = this.backend_kwargs.model_name;
    if (this.other_backend_kwargs?.[0]?.model_name) body.subcall_model = this.other_backend_kwargs[0].model_name;
    for (const [k, v] of [["max_cost_usd", this.max_budget], ["max_time_seconds", this.max_timeout], ["max_tokens", this.max_tokens], ["max_errors", this.max_errors]]) {
      if (v !== undefined && v !== null) body[k] = v;
    }
    return body;
  }

  // completion runs one loop; signal (an AbortSignal) cancels it.
  async completion(prompt, rootPrompt, { signal } = {}) {
    const start = performance.now();
    const events = [];
    this.run_id = undefined;
    let resp;
    try {
      resp = await fetch(`${this.base_url}/runs`, { method: "POST", headers: this.#headers(true), body: JSON.stringify(this.#body(prompt, rootPrompt)), signal });
    } catch (e) {
      if (signal?.aborted) throw new CancellationError("Execution cancelled by the caller");
      throw new ServerError(`cannot reach rlm serve at ${this.base_url}: ${e.cause?.message || e.message}`, 0, "unreachable");
    }
    if (!resp.ok) {
      const text = await resp.text();
      let code = "", message = text.trim();
      try {
        ({ code, message } = JSON.parse(text).error);
      } catch {}
      if (resp.status === 404 && code === "not_found") message += " (this rlm serve predates runs: upgrade it)";
      throw new ServerError(`rlm serve at ${this.base_url} refused the run (HTTP ${resp.status} ${code}): ${message}`, resp.status, code);
    }
    let final;
    const handle = (line) => {
      if (!line.trim()) return;
      const ev = JSON.parse(line);
      if (ev.type === "heartbeat") return; // the server keeping a quiet stream open
      if (ev.type === "run") this.run_id = ev.run_id;
      else if (ev.type === "result") final = ev;
      else {
        if (this.keep_events) events.push(ev);
        if (ev.type === "iteration" && this.on_iteration_start) this.on_iteration_start(ev.depth || 0, ev.iteration);
        if (this.on_event) this.on_event(ev);
      }
    };
    const decoder = new TextDecoder();
    let buf = "";
    try {
      for await (const chunk of resp.body) {
        buf += decoder.decode(chunk, { stream: true });
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          handle(buf.slice(0, nl));
          buf = buf.slice(nl + 1);
        }
      }
      handle(buf + decoder.decode());
    } catch (e) {
      if (signal?.aborted) throw new CancellationError("Execution cancelled by the caller");
      throw e;
    }
    if (!final) throw new RLMError(`the stream of run ${this.run_id} ended before its result: the server stopped or the connection broke`, "server");
    const elapsed = (performance.now() - start) / 1000;
    this.#raiseFor(final, elapsed);
    const priced = (final.usage?.unpriced_calls || 0) === 0;
    const model_usage_summaries = {};
    for (const [m, u] of Object.entries(final.usage_by_model || {})) {
      model_usage_summaries[m] = { total_calls: u.calls, total_input_tokens: u.input_tokens, total_output_tokens: u.output_tokens };
      if (priced) model_usage_summaries[m].total_cost = u.cost_usd;
    }
    const metadata = { run_id: final.run_id, answer_source: final.answer_source, no_final: !!final.no_final, usage: final.usage };
    if (this.keep_events) metadata.events = events;
    return {
      root_model: final.model, prompt, response: final.answer,
      usage_summary: { model_usage_summaries }, execution_time: elapsed, metadata,
    };
  }

  // cancel cancels the completion in progress.
  async cancel() {
    if (!this.run_id) return;
    try {
      await fetch(`${this.base_url}/runs/${this.run_id}/cancel`, { method: "POST", headers: this.#headers(false) });
    } catch {}
  }

  #raiseFor(st, elapsed) {
    if (st.status === "succeeded") return;
    const err = st.error || "the run ended without an answer";
    const u = st.usage || {};
    if (st.status === "cancelled") throw new CancellationError(err, st);
    if (st.error_kind === "budget") {
      if (st.budget_kind === "tokens") throw new TokenLimitExceededError(err, (u.input_tokens || 0) + (u.output_tokens || 0), this.max_tokens, st);
      if (st.budget_kind === "cost") throw new BudgetExceededError(err, u.cost_usd || 0, this.max_budget, st);
      if (st.budget_kind === "time") throw new TimeoutExceededError(err, elapsed, this.max_timeout, st);
    }
    throw new RLMError(err, st.error_kind || "internal", st);
  }
}
