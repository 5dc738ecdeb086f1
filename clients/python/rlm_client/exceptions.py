"""Errors of RLM.completion. The first five are the reference
implementation's (rlm/utils/exceptions.py), raised in the same cases: a
budget of the run ran out, or the run was cancelled. The others are rlm's:
the server refused the request, or the run failed for another reason."""

from typing import Optional


class BudgetExceededError(Exception):
    """The run's cost budget ran out before an answer."""

    def __init__(self, spent: float, budget: Optional[float], message: Optional[str] = None):
        self.spent = spent
        self.budget = budget
        super().__init__(message or "Budget exceeded: spent $%.6f of $%s budget" % (spent, budget))


class TimeoutExceededError(Exception):
    """The run's time budget ran out before an answer."""

    def __init__(self, elapsed: float, timeout: Optional[float], partial_answer: Optional[str] = None, message: Optional[str] = None):
        self.elapsed = elapsed
        self.timeout = timeout
        self.partial_answer = partial_answer
        super().__init__(message or "Timeout exceeded: %.1fs of %ss limit" % (elapsed, timeout))


class TokenLimitExceededError(Exception):
    """The run's token budget ran out before an answer."""

    def __init__(self, tokens_used: int, token_limit: Optional[int], partial_answer: Optional[str] = None, message: Optional[str] = None):
        self.tokens_used = tokens_used
        self.token_limit = token_limit
        self.partial_answer = partial_answer
        super().__init__(message or "Token limit exceeded: %s of %s tokens" % (tokens_used, token_limit))


class ErrorThresholdExceededError(Exception):
    """Kept for the reference API: rlm asks the model for its best answer
    when too many blocks fail in a row (max_errors) rather than failing, so
    RLM.completion does not raise it."""

    def __init__(self, error_count: int, threshold: int, last_error: Optional[str] = None, partial_answer: Optional[str] = None, message: Optional[str] = None):
        self.error_count = error_count
        self.threshold = threshold
        self.last_error = last_error
        self.partial_answer = partial_answer
        super().__init__(message or "Error threshold exceeded: %d consecutive errors (limit: %d)" % (error_count, threshold))


class CancellationError(Exception):
    """The run was cancelled (RLM.cancel, POST /runs/{id}/cancel, Ctrl-C)."""

    def __init__(self, partial_answer: Optional[str] = None, message: Optional[str] = None):
        self.partial_answer = partial_answer
        super().__init__(message or "Execution cancelled by user")


class RLMError(RuntimeError):
    """The run ended without an answer for a reason that is not a budget:
    the model provider failed (kind "provider"), the sandbox did
    ("sandbox"), or something else ("internal"). status is the run's
    status as the server gave it."""

    def __init__(self, message: str, kind: str = "internal", status: Optional[dict] = None):
        self.kind = kind
        self.status = status or {}
        super().__init__(message)


class ServerError(RLMError):
    """rlm serve refused the request (or could not be reached): http_status
    and code are its answer's (400 bad_field, 401 unauthorized, 429 busy,
    501 runs_disabled...), and the message says what to change."""

    def __init__(self, message: str, http_status: int = 0, code: str = ""):
        self.http_status = http_status
        self.code = code
        super().__init__(message, kind="server")
