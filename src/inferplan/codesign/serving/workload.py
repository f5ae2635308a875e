"""An LLM service's workload: a request rate, a mix of request classes and latency bounds.

A request of class ``k`` has ``P_k`` prompt tokens and asks for ``O_k`` output tokens; a share
``s_k`` of the requests is of that class. Requests arrive as a Poisson process of rate
``requests_per_s``. ``ttft_s`` bounds, for every class, the mean time to first token (queueing
for the prefill included, see :mod:`inferplan.codesign.serving.planner`); ``tpot_s`` bounds
the mean time per output token of a sequence in the decode batch (the time between two of its
tokens, prefills that interrupt the batch included).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferplan.errors import InvalidArgument

__all__ = ["RequestClass", "Workload"]

_SHARE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class RequestClass:
    """Requests of ``prompt_tokens`` prompt and ``output_tokens`` output tokens, a ``share``
    of all requests."""

    prompt_tokens: int
    output_tokens: int
    share: float

    @property
    def context(self) -> int:
        """The longest context of a request of the class: its prompt and its output."""
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class Workload:
    """A request rate, its classes and the optional TTFT and TPOT bounds (seconds).

    Examples
    --------
    >>> w = Workload(2.0, (RequestClass(100, 20, 0.5), RequestClass(300, 60, 0.5)))
    >>> w.mean_output_tokens, w.max_context
    (40.0, 360)
    """

    requests_per_s: float
    classes: tuple[RequestClass, ...]
    ttft_s: float | None = None
    tpot_s: float | None = None

    def __post_init__(self) -> None:
        rate = self.requests_per_s
        if not (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0):
            raise InvalidArgument(f"must be a positive finite number, got {rate!r}",
                                  field="requests_per_s")  # fmt: skip
        if not self.classes:
            raise InvalidArgument("must list at least one class", field="classes")
        for k, c in enumerate(self.classes):
            for name in ("prompt_tokens", "output_tokens"):
                value = getattr(c, name)
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    raise InvalidArgument(f"must be a positive integer, got {value!r}",
                                          field=f"classes[{k}].{name}")  # fmt: skip
            if not (math.isfinite(c.share) and 0 < c.share <= 1):
                raise InvalidArgument(f"must be in (0, 1], got {c.share!r}",
                                      field=f"classes[{k}].share")  # fmt: skip
        total = math.fsum(c.share for c in self.classes)
        if abs(total - 1) > _SHARE_TOLERANCE:
            raise InvalidArgument(f"the shares must sum to 1, got {total!r}", field="classes")
        for name in ("ttft_s", "tpot_s"):
            bound = getattr(self, name)
            if bound is not None and not (math.isfinite(bound) and bound > 0):
                raise InvalidArgument(f"must be a positive finite number of seconds, got "
                                      f"{bound!r}", field=name)  # fmt: skip

    @property
    def mean_output_tokens(self) -> float:
        """``O-bar``: the output tokens of a request, on average."""
        return math.fsum(c.share * c.output_tokens for c in self.classes)

    @property
    def mean_context(self) -> float:
        """A decode step's mean context per sequence: each output token of class ``k`` attends
        to ``P_k + t`` tokens at its ``t``-th step (``t = 1..O_k``), weighted by the tokens."""
        tokens = math.fsum(c.share * c.output_tokens * (c.prompt_tokens + (c.output_tokens + 1) / 2)
                           for c in self.classes)  # fmt: skip
        return tokens / self.mean_output_tokens

    @property
    def max_context(self) -> int:
        """The longest context of any class (what the KV cache reserves per sequence)."""
        return max(c.context for c in self.classes)

    def check_context(self, max_context: int) -> None:
        """Raise :class:`InvalidArgument` naming the first class longer than ``max_context``."""
        for k, c in enumerate(self.classes):
            if c.context > max_context:
                raise InvalidArgument(
                    f"a request of {c.prompt_tokens} + {c.output_tokens} tokens is longer than "
                    f"the model's context of {max_context} tokens",
                    field=f"classes[{k}]",
                )

    def to_dict(self) -> dict[str, object]:
        return {
            "requests_per_s": self.requests_per_s,
            "classes": [{"prompt_tokens": c.prompt_tokens, "output_tokens": c.output_tokens,
                         "share": c.share} for c in self.classes],
            "ttft_s": self.ttft_s, "tpot_s": self.tpot_s,
        }  # fmt: skip
