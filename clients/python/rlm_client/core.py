"""RLM: the reference implementation's entry point (alexzhang13/rlm,
rlm/core/rlm.py), answered by rlm.

RLM(...).completion(prompt, root_prompt) runs one Recursive Language Model
loop and returns an RLMChatCompletion, as the reference does. The loop runs
in rlm: on a `rlm serve` (base_url, or $RLM_URL), whose model and API key
are the server's, or, without a URL, in a `rlm run` started here with the
backend given. Either way the code the model writes runs in rlm's sandbox,
not in this process.
"""

import json
import os
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Optional

from ._transport import HTTPTransport, SpawnTransport
from .exceptions import (
    BudgetExceededError,
    CancellationError,
    RLMError,
    TimeoutExceededError,
    TokenLimitExceededError,
)
from .types import RLMChatCompletion, UsageSummary

# The task of a completion without root_prompt: in the reference the
# prompt is the context and the model answers it.
DEFAULT_TASK = "The prompt to respond to is in the REPL variable `context`: read it, and answer it as its recipient would."

# The reference's options rlm does not offer (yet), and what to do instead.
UNSUPPORTED = {
    "custom_tools": "REPL tools are declared on the rlm side (a task file's tools), not sent from Python",
    "custom_sub_tools": "REPL tools are declared on the rlm side, not sent from Python",
    "compaction": "history compaction is rlm's to configure, not a client option",
    "custom_system_prompt": "the system prompt is the server's (rlm run --system-prompt where offered)",
    "logger": "rlm keeps its own trace: use RLM(keep_events=True), or GET /runs/{id}/events",
    "sampling_args": "sampling settings are the server's",
    "sub_sampling_args": "sampling settings are the server's",
    "user_prologue": "not offered by rlm",
}


class RLM:
    """A Recursive Language Model, answered by rlm.

    The reference's arguments keep their meaning: backend and
    backend_kwargs (model_name; base_url and api_key when rlm runs here),
    other_backends / other_backend_kwargs (the sub-call model), max_depth,
    max_iterations, max_budget (USD), max_timeout (seconds), max_tokens,
    max_errors, verbose, on_iteration_start, on_subcall_start. Budgets the
    server caps may be refused (a ServerError says which and why).

    rlm's own: base_url (rlm serve's address; default $RLM_URL; none: run
    `rlm run` here), token (its bearer token; default $RLM_TOKEN),
    rlm_path (the rlm binary for running here), on_event (called with each
    event of the run as it happens: a dict with "type" iteration, llm_call,
    code, subcall, final...), keep_events (put the events in the result's
    metadata), timeout (seconds without a byte from the server before
    giving up; default none: the run's own max_timeout bounds it).
    """

    def __init__(
        self,
        backend: str = "openai",
        backend_kwargs: Optional[Dict[str, Any]] = None,
        environment: str = "local",
        environment_kwargs: Optional[Dict[str, Any]] = None,
        depth: int = 0,
        max_depth: int = 1,
        max_iterations: int = 30,
        max_budget: Optional[float] = None,
        max_timeout: Optional[float] = None,
        max_tokens: Optional[int] = None,
        max_errors: Optional[int] = None,
        other_backends: Optional[List[str]] = None,
        other_backend_kwargs: Optional[List[Dict[str, Any]]] = None,
        verbose: bool = False,
        on_iteration_start: Optional[Callable[[int, int], None]] = None,
        on_subcall_start: Optional[Callable[[int, str, str], None]] = None,
        *,
        base_url: Optional[str] = None,
        token: Optional[str] = None,
        rlm_path: str = "rlm",
        on_event: Optional[Callable[[Dict[str, Any]], None]] = None,
        keep_events: bool = False,
        timeout: Optional[float] = None,
        **kwargs: Any,
    ):
        self.persistent = bool(kwargs.pop("persistent", False))
        self._last_run: Optional[str] = None
        for name, value in kwargs.items():
            if name in UNSUPPORTED:
                # The reference's defaults (None, False) ask for nothing.
                if value is None or value is False:
                    continue
                raise ValueError("RLM(%s=...): %s" % (name, UNSUPPORTED[name]))
            if name in ("compaction_threshold_pct", "max_concurrent_subcalls", "on_subcall_complete", "on_iteration_complete", "orchestrator"):
                continue  # accepted for compatibility; rlm's own settings apply
            raise TypeError("RLM() got an unexpected keyword argument %r" % name)
        if depth != 0:
            raise ValueError("RLM(depth=%r): rlm starts every run at the root (depth 0); limit recursion with max_depth" % depth)
        if environment not in (None, "local"):
            warnings.warn(
                "RLM(environment=%r): rlm runs the model's code in its own sandbox (the server's isolation); environment is ignored" % environment,
                stacklevel=2,
            )
        if max_depth < 1:
            raise ValueError(
                "RLM(max_depth=%r): the reference answers with a plain model call, no REPL, below 1; rlm runs every completion as an RLM loop: "
                "use max_depth=1 (no recursion) or more" % max_depth
            )
        if other_backends is not None and len(other_backends) != 1:
            raise ValueError("other_backends: give one backend, the model answering sub-calls (as the reference allows)")
        self.backend = backend
        self.backend_kwargs = dict(backend_kwargs or {})
        self.other_backend_kwargs = other_backend_kwargs
        self.max_depth = max_depth
        self.max_iterations = max_iterations
        self.max_budget = max_budget
        self.max_timeout = max_timeout
        self.max_tokens = max_tokens
        self.max_errors = max_errors
        self.verbose = verbose
        self.on_iteration_start = on_iteration_start
        self.on_subcall_start = on_subcall_start
        self.on_event = on_event
        self.keep_events = keep_events
        self._model = self.backend_kwargs.get("model_name", "")
        self.base_url = base_url or os.environ.get("RLM_URL") or None
        if self.persistent and not self.base_url:
            raise ValueError(
                "RLM(persistent=True) needs rlm serve (base_url= or $RLM_URL): the REPL kept between completions lives in the server"
            )
        if self.base_url:
            self._transport = HTTPTransport(self.base_url, token or os.environ.get("RLM_TOKEN"), timeout)
        else:
            self._transport = SpawnTransport(rlm_path, backend, self.backend_kwargs)

    def _body(self, prompt: Any, root_prompt: Optional[str]) -> Dict[str, Any]:
        # rlm runs the reference's protocol for this client: its prompt and
        # answer dict, rlm_query(prompt, model), and its max_depth, which
        # counts the root (1: rlm_query is a plain model call).
        body: Dict[str, Any] = {"task": root_prompt or DEFAULT_TASK, "context": prompt, "protocol": "reference", "max_depth": self.max_depth, "max_iterations": self.max_iterations}
        if self.persistent:
            # The server keeps the run's REPL and history (keep), and the
            # next completion continues them; its prompt is the next turn,
            # given in the task (the REPL keeps its first `context`).
            body["keep"] = True
            if self._last_run:
                body["continue"] = self._last_run
                del body["context"]
                text = prompt if isinstance(prompt, str) else json.dumps(prompt)
                body["task"] = (root_prompt + "\n\n" if root_prompt else "") + "The next message:\n" + text
        model = self.backend_kwargs.get("model_name")
        if model:
            body["model"] = model
        if self.other_backend_kwargs and self.other_backend_kwargs[0].get("model_name"):
            body["subcall_model"] = self.other_backend_kwargs[0]["model_name"]
        for key, value in (("max_cost_usd", self.max_budget), ("max_time_seconds", self.max_timeout), ("max_tokens", self.max_tokens), ("max_errors", self.max_errors)):
            if value is not None:
                body[key] = value
        return body

    def completion(self, prompt: Any, root_prompt: Optional[str] = None) -> RLMChatCompletion:
        """Runs one RLM loop. prompt is the context the model explores in
        the REPL (a str, or a list or dict, given to it as such);
        root_prompt is the question the model sees (without one, it is
        asked to answer the prompt). Returns the answer (response), the
        usage per model and the time taken; raises TokenLimitExceededError,
        BudgetExceededError or TimeoutExceededError when a budget ran out
        before an answer, CancellationError when the run was cancelled,
        ServerError when rlm refused the request, RLMError otherwise."""
        start = time.perf_counter()
        events: List[Dict[str, Any]] = []

        def on_event(ev: Dict[str, Any]) -> None:
            if self.keep_events:
                events.append(ev)
            self._callbacks(ev)

        try:
            st = self._transport.run(self._body(prompt, root_prompt), on_event)
        except KeyboardInterrupt:
            self._transport.cancel()
            raise CancellationError(message="Execution cancelled by user (Ctrl+C)") from None
        elapsed = time.perf_counter() - start
        if self.persistent and st.get("run_id"):
            # Even a turn that failed (a budget) kept its REPL: the next
            # one continues it, and close() ends it.
            self._last_run = st.get("run_id")
        self._raise_for(st, elapsed)
        usage = st.get("usage") or {}
        metadata: Dict[str, Any] = {
            "run_id": st.get("run_id"),
            "answer_source": st.get("answer_source"),
            "no_final": st.get("no_final", False),
            "usage": usage,
        }
        if self.keep_events:
            metadata["events"] = events
        return RLMChatCompletion(
            root_model=st.get("model") or self.backend_kwargs.get("model_name", "unknown"),
            prompt=prompt,
            response=st.get("answer", ""),
            usage_summary=UsageSummary.from_rlm(st.get("usage_by_model") or {}, usage.get("unpriced_calls", 0) == 0),
            execution_time=elapsed,
            metadata=metadata,
        )

    def cancel(self) -> None:
        """Cancels the completion in progress (call it from another thread)."""
        self._transport.cancel()

    def _callbacks(self, ev: Dict[str, Any]) -> None:
        kind, depth = ev.get("type"), ev.get("depth", 0)
        if kind == "iteration" and self.on_iteration_start:
            self.on_iteration_start(depth, ev.get("iteration", 0))
        if kind == "subcall" and ev.get("kind") == "rlm_query" and self.on_subcall_start:
            # As the reference: a child RLM starts, at the child's depth,
            # with the model that drives it (the run's).
            self.on_subcall_start(depth + 1, self._model, (ev.get("prompt") or "")[:80])
        if self.on_event:
            self.on_event(ev)
        if self.verbose:
            line = _describe(ev)
            if line:
                print("[rlm] %s%s" % ("  " * depth, line), file=sys.stderr)

    def _raise_for(self, st: Dict[str, Any], elapsed: float) -> None:
        status = st.get("status")
        if status == "succeeded":
            return
        err = st.get("error") or "the run ended without an answer"
        usage = st.get("usage") or {}
        if status == "cancelled":
            raise CancellationError(message=err)
        if st.get("error_kind") == "budget":
            kind = st.get("budget_kind")
            if kind == "tokens":
                raise TokenLimitExceededError(usage.get("input_tokens", 0) + usage.get("output_tokens", 0), self.max_tokens, message=err)
            if kind == "cost":
                raise BudgetExceededError(usage.get("cost_usd", 0.0), self.max_budget, message=err)
            if kind == "time":
                raise TimeoutExceededError(elapsed, self.max_timeout, message=err)
        raise RLMError(err, st.get("error_kind") or "internal", st)

    def close(self) -> None:
        """Ends a persistent RLM's kept REPL on the server (DELETE
        /runs/{id}); otherwise nothing to release: each completion is one
        run."""
        if self.persistent and self._last_run:
            run, self._last_run = self._last_run, None
            self._transport.delete(run)

    def __enter__(self) -> "RLM":
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> bool:
        self.close()
        return False


def _describe(ev: Dict[str, Any]) -> str:
    kind = ev.get("type")
    if kind == "iteration":
        return "iteration %d" % ev.get("iteration", 0)
    if kind == "code":
        first = (ev.get("code") or "").strip().splitlines()[:1]
        return "code: %s" % (first[0] if first else "")
    if kind == "subcall":
        return "%s: %s" % (ev.get("kind"), (ev.get("prompt") or "")[:60])
    if kind == "final":
        return "answer (%s): %s" % (ev.get("source"), (ev.get("answer") or "")[:80])
    if kind in ("budget_warning", "warning"):
        return "warning: %s" % ev.get("message")
    return ""
