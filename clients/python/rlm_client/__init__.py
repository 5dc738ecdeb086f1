"""rlm_client: Recursive Language Model runs on rlm (github.com/rlmkit/rlm)
with the reference implementation's API:

    from rlm_client import RLM
    rlm = RLM(backend_kwargs={"model_name": "gpt-4o"}, base_url="http://127.0.0.1:8080")
    print(rlm.completion(huge_text, root_prompt="How many errors are logged?").response)

Standard library only. See README.md.
"""

from .core import RLM
from .exceptions import (
    BudgetExceededError,
    CancellationError,
    ErrorThresholdExceededError,
    RLMError,
    ServerError,
    TimeoutExceededError,
    TokenLimitExceededError,
)
from .types import ModelUsageSummary, RLMChatCompletion, UsageSummary

__all__ = [
    "RLM",
    "RLMChatCompletion",
    "UsageSummary",
    "ModelUsageSummary",
    "BudgetExceededError",
    "TimeoutExceededError",
    "TokenLimitExceededError",
    "ErrorThresholdExceededError",
    "CancellationError",
    "RLMError",
    "ServerError",
]
