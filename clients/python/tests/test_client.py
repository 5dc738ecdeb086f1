"""Offline tests of rlm_client: what it sends and how it reads answers,
with a transport that records the request and plays back a run status.
The end-to-end tests (a real rlm serve, a real rlm run) are the
testscripts serve/python_client.txtar, which also runs these."""

import unittest

import rlm_client
from rlm_client import (
    RLM,
    BudgetExceededError,
    CancellationError,
    RLMChatCompletion,
    RLMError,
    TimeoutExceededError,
    TokenLimitExceededError,
)


class Played:
    """A transport that answers every run with status, after events."""

    def __init__(self, status, events=()):
        self.status, self.events, self.body = status, list(events), None

    def run(self, body, on_event):
        self.body = body
        for ev in self.events:
            on_event(ev)
        return dict(self.status)

    def delete(self, run_id):
        self.deleted = run_id

    def cancel(self):
        pass


def rlm(status, events=(), **kw):
    r = RLM(base_url="http://127.0.0.1:1", **kw)
    r._transport = Played(status, events)
    return r


OK = {"status": "succeeded", "run_id": "run_1", "model": "m", "answer": "42", "answer_source": "final",
      "usage": {"input_tokens": 3, "output_tokens": 4, "cost_usd": 0.5, "calls": 1},
      "usage_by_model": {"m": {"calls": 1, "input_tokens": 3, "output_tokens": 4, "cost_usd": 0.5}}}


class TestRequest(unittest.TestCase):
    def test_reference_arguments_become_the_run_request(self):
        r = rlm(OK, backend_kwargs={"model_name": "m"}, other_backends=["openai"], other_backend_kwargs=[{"model_name": "s"}],
                max_depth=3, max_iterations=7, max_budget=1.5, max_timeout=60, max_tokens=1000, max_errors=2)
        r.completion({"k": [1, 2]}, root_prompt="q")
        self.assertEqual(r._transport.body, {"task": "q", "context": {"k": [1, 2]}, "model": "m", "subcall_model": "s",
                                             "protocol": "reference", "max_depth": 3, "max_iterations": 7, "max_cost_usd": 1.5,
                                             "max_time_seconds": 60, "max_tokens": 1000, "max_errors": 2})

    def test_persistent_keeps_and_continues_the_run(self):
        r = rlm(OK, persistent=True)
        r.completion("first input")
        self.assertEqual((r._transport.body["keep"], r._transport.body["context"]), (True, "first input"))
        self.assertNotIn("continue", r._transport.body)
        r.completion({"more": 1}, root_prompt="and now?")
        body = r._transport.body
        self.assertEqual((body["keep"], body["continue"]), (True, "run_1"))
        self.assertNotIn("context", body)
        self.assertEqual(body["task"], 'and now?\n\nThe next message:\n{"more": 1}')
        r.close()
        self.assertEqual(r._transport.deleted, "run_1")

    def test_without_root_prompt_the_model_answers_the_prompt(self):
        r = rlm(OK)
        r.completion("what is 6*7?")
        self.assertIn("REPL variable `context`", r._transport.body["task"])

    def test_what_rlm_does_not_offer_is_refused_with_the_reason(self):
        with self.assertRaisesRegex(ValueError, "persistent=True. needs rlm serve"):
            RLM(persistent=True)
        with self.assertRaisesRegex(ValueError, "max_depth=0"):
            RLM(base_url="http://x", max_depth=0)
        with self.assertRaisesRegex(TypeError, "unexpected keyword argument 'bogus'"):
            RLM(base_url="http://x", bogus=1)
        RLM(base_url="http://x", persistent=False, custom_tools=None)  # the reference's defaults


class TestResult(unittest.TestCase):
    def test_the_reference_shape(self):
        seen = []
        res = rlm(OK, [{"type": "iteration", "depth": 0, "iteration": 1}], on_iteration_start=lambda d, i: seen.append((d, i)),
                  keep_events=True).completion("c", "q")
        self.assertIsInstance(res, RLMChatCompletion)
        self.assertEqual((res.response, res.root_model, res.prompt), ("42", "m", "c"))
        self.assertEqual(res.usage_summary.to_dict(), {"model_usage_summaries": {"m": {"total_calls": 1, "total_input_tokens": 3, "total_output_tokens": 4, "total_cost": 0.5}}, "total_cost": 0.5})
        self.assertEqual(seen, [(0, 1)])
        self.assertEqual(res.metadata["events"][0]["type"], "iteration")
        again = RLMChatCompletion.from_dict(res.to_dict())
        self.assertEqual(again.usage_summary.total_input_tokens, 3)

    def test_a_child_start_is_reported_as_the_reference_does(self):
        seen = []
        evs = [{"type": "subcall", "depth": 0, "kind": "llm_query", "prompt": "q"},
               {"type": "subcall", "depth": 0, "kind": "rlm_query", "prompt": "sub-task", "child": 1}]
        rlm(OK, evs, backend_kwargs={"model_name": "m"}, on_subcall_start=lambda d, m, p: seen.append((d, m, p))).completion("c")
        self.assertEqual(seen, [(1, "m", "sub-task")])

    def test_an_unpriced_call_has_no_cost(self):
        st = dict(OK, usage=dict(OK["usage"], unpriced_calls=1))
        self.assertIsNone(rlm(st).completion("c").usage_summary.total_cost)


class TestErrors(unittest.TestCase):
    def failed(self, **st):
        return dict(OK, status="failed", answer="", error="E", **st)

    def test_budgets_are_the_reference_exceptions(self):
        with self.assertRaises(TokenLimitExceededError) as c:
            rlm(self.failed(error_kind="budget", budget_kind="tokens"), max_tokens=5).completion("c")
        self.assertEqual((c.exception.tokens_used, c.exception.token_limit), (7, 5))
        with self.assertRaises(BudgetExceededError):
            rlm(self.failed(error_kind="budget", budget_kind="cost")).completion("c")
        with self.assertRaises(TimeoutExceededError):
            rlm(self.failed(error_kind="budget", budget_kind="time")).completion("c")
        with self.assertRaises(CancellationError):
            rlm(dict(self.failed(error_kind="cancelled"), status="cancelled")).completion("c")
        with self.assertRaises(RLMError) as c:
            rlm(self.failed(error_kind="provider")).completion("c")
        self.assertEqual(c.exception.kind, "provider")

    def test_exports(self):
        for name in rlm_client.__all__:
            self.assertTrue(hasattr(rlm_client, name), name)


if __name__ == "__main__":
    unittest.main()
