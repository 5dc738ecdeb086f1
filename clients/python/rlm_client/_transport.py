"""How RLM.completion reaches rlm: over HTTP (POST /runs on rlm serve,
its events streamed as NDJSON) or by running `rlm run` here."""

import json
import os
import re
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Optional

from .exceptions import RLMError, ServerError

Event = Dict[str, Any]


def _server_error(e: urllib.error.HTTPError, base_url: str) -> ServerError:
    body = e.read().decode("utf-8", "replace")
    code, message = "", body.strip()
    try:
        err = json.loads(body)["error"]
        code, message = err.get("code", ""), err.get("message", message)
    except (ValueError, KeyError, TypeError):
        pass
    if e.code == 404 and code == "not_found":
        message += " (this rlm serve predates runs: upgrade it)"
    return ServerError("rlm serve at %s refused the run (HTTP %d %s): %s" % (base_url, e.code, code, message), e.code, code)


class HTTPTransport:
    """POST /runs, reading the stream line by line as it comes."""

    def __init__(self, base_url: str, token: Optional[str], timeout: Optional[float]):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.run_id: Optional[str] = None

    def _request(self, method: str, path: str, body: Optional[dict] = None) -> urllib.request.Request:
        headers = {"Accept": "application/x-ndjson, application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        return urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)

    def run(self, body: dict, on_event: Callable[[Event], None]) -> dict:
        self.run_id = None
        try:
            resp = urllib.request.urlopen(self._request("POST", "/runs", body), timeout=self.timeout)
        except urllib.error.HTTPError as e:
            raise _server_error(e, self.base_url) from None
        except urllib.error.URLError as e:
            raise ServerError(
                "cannot reach rlm serve at %s: %s (start one with `rlm serve --provider ...`, or give RLM(base_url=...) the right address)"
                % (self.base_url, e.reason),
                0,
                "unreachable",
            ) from None
        final = None
        with resp:
            for line in resp:
                if not line.strip():
                    continue
                ev = json.loads(line)
                kind = ev.get("type")
                if kind == "heartbeat":
                    continue  # the server keeping a quiet stream open
                if kind == "run":
                    self.run_id = ev.get("run_id")
                elif kind == "result":
                    final = ev
                else:
                    on_event(ev)
        if final is None:
            raise RLMError("the stream of run %s ended before its result: the server stopped or the connection broke" % self.run_id, "server")
        return final

    def cancel(self) -> None:
        """Cancels the run in progress (from another thread, or on Ctrl-C)."""
        if not self.run_id:
            return
        try:
            urllib.request.urlopen(self._request("POST", "/runs/%s/cancel" % self.run_id), timeout=30).close()
        except urllib.error.URLError:
            pass  # it ended, or the server is gone: either way it runs no more

    def delete(self, run_id: str) -> None:
        """Forgets an ended run, and ends the REPL it kept (DELETE /runs/{id})."""
        try:
            urllib.request.urlopen(self._request("DELETE", "/runs/%s" % run_id), timeout=30).close()
        except urllib.error.URLError:
            pass  # already forgotten, or the server is gone: the REPL is gone too


# The reference's backends, as rlm's providers: an OpenAI-compatible
# service is rlm's openai provider with its base_url.
PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "vllm": "openai",
    "openrouter": "openai",
    "litellm": "openai",
    "ollama": "ollama",
    "claude-code": "claude-code",
    "replay": "replay",
}
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
EXIT_KIND = {3: "budget", 4: "provider", 5: "sandbox", 130: "cancelled"}


class SpawnTransport:
    """Runs `rlm run --format json --trace FILE` with the context on stdin;
    the events are the trace's, given after the run ends."""

    def __init__(self, rlm_path: str, backend: str, backend_kwargs: Dict[str, Any]):
        provider = PROVIDERS.get(backend)
        if provider is None:
            raise ValueError(
                "backend %r: without a base_url rlm_client runs `rlm run`, whose providers are %s; "
                "use one of %s, or run `rlm serve` with the model you want and pass RLM(base_url=...)"
                % (backend, ", ".join(sorted(set(PROVIDERS.values()))), ", ".join(sorted(PROVIDERS)))
            )
        self.rlm_path = rlm_path
        self.provider = provider
        self.kwargs = backend_kwargs
        self.proc: Optional[subprocess.Popen] = None

    def run(self, body: dict, on_event: Callable[[Event], None]) -> dict:
        args = [self.rlm_path, "run", "--quiet", "--format", "json", "--task", body["task"], "--provider", self.provider]
        if body.get("model"):
            args += ["--model", body["model"]]
        if body.get("subcall_model"):
            args += ["--subcall-model", body["subcall_model"]]
        if self.kwargs.get("base_url"):
            args += ["--base-url", self.kwargs["base_url"]]
        if body.get("protocol"):
            args += ["--protocol", body["protocol"]]
        for field, flag in (("max_iterations", "--max-iterations"), ("max_depth", "--max-depth"), ("max_errors", "--max-errors"),
                            ("max_tokens", "--max-tokens"), ("max_cost_usd", "--max-cost")):
            if body.get(field) is not None:
                args += [flag, str(body[field])]
        if body.get("max_time_seconds") is not None:
            args += ["--max-time", "%gs" % body["max_time_seconds"]]
        env = dict(os.environ)
        if self.kwargs.get("api_key") and self.provider in KEY_ENV:
            # The key goes to rlm's environment, never onto its command line.
            env[KEY_ENV[self.provider]] = self.kwargs["api_key"]
        stdin = None
        if "context" in body:
            ctx = body["context"]
            stdin = (ctx if isinstance(ctx, str) else json.dumps(ctx)).encode("utf-8")
            args += ["--context", "-"]
        with tempfile.TemporaryDirectory(prefix="rlm-client-") as tmp:
            trace = os.path.join(tmp, "run.jsonl")
            args += ["--trace", trace]
            with open(os.path.join(tmp, "out"), "w+b") as out_f, open(os.path.join(tmp, "err"), "w+b") as err_f:
                try:
                    self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=out_f, stderr=err_f, env=env)
                except FileNotFoundError:
                    raise RLMError(
                        "cannot run %r: rlm is not installed or not on PATH (give RLM(rlm_path=...), or RLM(base_url=...) to use a running rlm serve)" % self.rlm_path,
                        "server",
                    ) from None
                if stdin is not None:
                    self.proc.stdin.write(stdin)
                self.proc.stdin.close()
                events = self._follow(trace, on_event)
                code = self.proc.returncode
                out_f.seek(0)
                err_f.seek(0)
                out, err = out_f.read(), err_f.read()
        try:
            res = json.loads(out)
        except ValueError:
            raise RLMError("`rlm run` failed (exit status %d): %s" % (code, err.decode("utf-8", "replace").strip()), "usage" if code == 2 else "internal") from None
        return status_from_run(res, code, events)

    def _follow(self, trace: str, on_event: Callable[[Event], None]) -> List[Event]:
        """Gives the trace's events to on_event as rlm writes them (each
        line is written whole), until rlm has exited and the trace is read."""
        events: List[Event] = []
        pos, partial = 0, b""
        while True:
            exited = self.proc.poll() is not None
            if os.path.exists(trace):
                with open(trace, "rb") as f:
                    f.seek(pos)
                    data = f.read()
                pos += len(data)
                lines = (partial + data).split(b"\n")
                partial = lines.pop()
                for line in lines:
                    if line.strip():
                        ev = json.loads(line)
                        events.append(ev)
                        on_event(ev)
            if exited:
                return events
            time.sleep(0.02)

    def cancel(self) -> None:
        if self.proc and self.proc.poll() is None:
            # rlm run ends its run on SIGTERM as on Ctrl-C (exit 130).
            self.proc.terminate()


def status_from_run(res: dict, code: int, events: List[Event]) -> dict:
    """The run status (GET /runs/{id}'s shape) of `rlm run --format json`'s
    output, its exit status and its trace."""
    st = {
        "status": "succeeded" if not res.get("error") else "failed",
        "answer": res.get("answer", ""),
        "answer_source": res.get("answer_source", ""),
        "no_final": res.get("no_final", False),
        "usage": res.get("usage", {}),
        "usage_by_model": usage_by_model(events),
        "error": res.get("error", ""),
        "model": "",
    }
    for ev in events:
        if ev.get("type") == "run_start":
            st["model"] = (ev.get("config") or {}).get("model", "")
            break
    if st["error"]:
        st["error_kind"] = EXIT_KIND.get(code, "internal")
        if st["error_kind"] == "cancelled":
            st["status"] = "cancelled"
        m = re.match(r"(tokens|cost|time) budget exhausted", st["error"])
        if m:
            st["budget_kind"] = m.group(1)
    return st


def usage_by_model(events: List[Event]) -> Dict[str, Dict[str, Any]]:
    """Model calls by the model asked for, as the server counts them."""
    out: Dict[str, Dict[str, Any]] = {}
    for ev in events:
        if ev.get("type") != "llm_call":
            continue
        model = (ev.get("request") or {}).get("model", "")
        resp = ev.get("response") or {}
        usage = resp.get("usage") or {}
        m = out.setdefault(model, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0})
        m["calls"] += 1
        m["input_tokens"] += usage.get("input_tokens", 0)
        m["output_tokens"] += usage.get("output_tokens", 0)
        m["cost_usd"] += resp.get("cost_usd", 0.0)
    return out
