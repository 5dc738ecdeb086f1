"""The result types of RLM.completion, in the reference implementation's
shape (alexzhang13/rlm, rlm/core/types.py): the same classes, fields and
to_dict/from_dict, so code written against it reads rlm's results."""

from dataclasses import dataclass
from typing import Any, Dict, Optional, Union


@dataclass
class ModelUsageSummary:
    total_calls: int
    total_input_tokens: int
    total_output_tokens: int
    total_cost: Optional[float] = None  # USD, when the server knows the model's price

    def to_dict(self) -> Dict[str, Any]:
        out = {
            "total_calls": self.total_calls,
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
        }
        if self.total_cost is not None:
            out["total_cost"] = self.total_cost
        return out

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "ModelUsageSummary":
        return cls(
            total_calls=data.get("total_calls"),
            total_input_tokens=data.get("total_input_tokens"),
            total_output_tokens=data.get("total_output_tokens"),
            total_cost=data.get("total_cost"),
        )


@dataclass
class UsageSummary:
    model_usage_summaries: Dict[str, ModelUsageSummary]

    @property
    def total_cost(self) -> Optional[float]:
        costs = [s.total_cost for s in self.model_usage_summaries.values() if s.total_cost is not None]
        return sum(costs) if costs else None

    @property
    def total_input_tokens(self) -> int:
        return sum(s.total_input_tokens for s in self.model_usage_summaries.values())

    @property
    def total_output_tokens(self) -> int:
        return sum(s.total_output_tokens for s in self.model_usage_summaries.values())

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "model_usage_summaries": {m: s.to_dict() for m, s in self.model_usage_summaries.items()},
        }
        if self.total_cost is not None:
            out["total_cost"] = self.total_cost
        return out

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "UsageSummary":
        return cls(
            model_usage_summaries={
                m: ModelUsageSummary.from_dict(s) for m, s in (data.get("model_usage_summaries") or {}).items()
            }
        )

    @classmethod
    def from_rlm(cls, usage_by_model: Dict[str, Dict[str, Any]], priced: bool) -> "UsageSummary":
        """From rlm's usage_by_model (GET /runs/{id}). A cost is given only
        when every call was priced: rlm counts a call it knows no price for
        as free, which is not a cost of 0."""
        return cls(
            model_usage_summaries={
                m: ModelUsageSummary(
                    total_calls=u.get("calls", 0),
                    total_input_tokens=u.get("input_tokens", 0),
                    total_output_tokens=u.get("output_tokens", 0),
                    total_cost=u.get("cost_usd", 0.0) if priced else None,
                )
                for m, u in (usage_by_model or {}).items()
            }
        )


@dataclass
class RLMChatCompletion:
    """The outcome of one RLM.completion call."""

    root_model: str
    prompt: Union[str, Dict[str, Any], Any]
    response: str
    usage_summary: UsageSummary
    execution_time: float
    # rlm's own record of the run: run_id, answer_source, usage (its
    # totals: iterations, sub-calls, depth reached...), and the events
    # when RLM(keep_events=True).
    metadata: Optional[Dict[str, Any]] = None
    error: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        out = {
            "root_model": self.root_model,
            "prompt": self.prompt,
            "response": self.response,
            "usage_summary": self.usage_summary.to_dict(),
            "execution_time": self.execution_time,
        }
        if self.metadata is not None:
            out["metadata"] = self.metadata
        if self.error is not None:
            out["error"] = self.error
        return out

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "RLMChatCompletion":
        return cls(
            root_model=data.get("root_model"),
            prompt=data.get("prompt"),
            response=data.get("response"),
            usage_summary=UsageSummary.from_dict(data.get("usage_summary") or {}),
            execution_time=data.get("execution_time"),
            metadata=data.get("metadata"),
            error=data.get("error"),
        )
