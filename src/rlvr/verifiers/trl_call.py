"""TRL's reward-function calling convention as pure functions (see `reward_funcs.py` for the rules).

`trl_kwargs` builds the keyword arguments `GRPOTrainer._calculate_rewards` passes (TRL 1.x),
`check_rewards` enforces its return contract, `combine` is its weighted `nansum` over functions.
Imports nothing else of rlvr's verifiers, so `base.CallableVerifier` can use it.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from typing import Any, Sequence

from rlvr.types import Problem

_INTERNAL_COLUMNS = {"source", "reference_column"}  # rlvr's bookkeeping, not dataset columns


def discard(*_: Any, **__: Any) -> None:
    return None


def trl_kwargs(responses: Sequence[str], problems: Sequence[Problem],
               token_ids: Sequence[Sequence[int]] | None = None) -> dict[str, Any]:
    """The keyword arguments TRL's GRPOTrainer passes a reward function for this batch."""
    conversational = bool(problems) and isinstance(problems[0].prompt, list)
    completions: list[Any] = ([[{"role": "assistant", "content": r}] for r in responses]
                              if conversational else list(responses))
    kwargs: dict[str, Any] = {"prompts": [p.prompt for p in problems], "completions": completions,
                              "completion_ids": [list(t) for t in token_ids] if token_ids is not None
                              else [None] * len(responses)}
    columns: dict[str, list[Any]] = {}
    for key in dict.fromkeys(k for p in problems for k in p.metadata):
        if key not in _INTERNAL_COLUMNS:
            columns[key] = [p.metadata.get(key) for p in problems]
    ref_names = {p.metadata.get("reference_column") or "reference" for p in problems}
    for name in ref_names:
        columns.setdefault(name, [p.reference for p in problems])
    kwargs.update(columns)
    kwargs.update(trainer_state=None, log_extra=discard, log_metric=discard)
    return kwargs


def await_if_needed(value: Any) -> Any:
    """The result of an `async def` reward function's coroutine (TRL accepts those), else `value`."""
    if inspect.isawaitable(value):
        return asyncio.run(_wait(value))
    return value


async def _wait(awaitable: Any) -> Any:
    return await awaitable


def check_rewards(rewards: Any, n: int) -> list[float | None]:
    """TRL's contract: one float (or None) per completion. Raises ValueError otherwise."""
    rewards = list(rewards)
    if len(rewards) != n:
        raise ValueError(f"returned {len(rewards)} rewards for {n} completions")
    out: list[float | None] = []
    for r in rewards:
        if r is None or (isinstance(r, float) and math.isnan(r)):
            out.append(None)
        elif isinstance(r, bool) or not isinstance(r, (int, float)) and not hasattr(r, "__float__"):
            raise ValueError(f"returned {type(r).__name__} {r!r}; expected float or None")
        else:
            out.append(float(r))
    return out


def combine(per_term: Sequence[Sequence[float | None]], weights: Sequence[float]) -> list[float | None]:
    """TRL's `(rewards_per_func * weights).nansum(dim=1)`; None where every term is None."""
    out: list[float | None] = []
    for column in zip(*per_term):
        vals = [w * r for w, r in zip(weights, column) if r is not None]
        out.append(sum(vals) if vals else None)
    return out
