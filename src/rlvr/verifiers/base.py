"""The `Verifier` protocol, the registry that maps names to verifiers, and TRL-callable adapters.

A verifier turns (response text, problem) into a `Score`. Verifiers must never raise on model
output and must never hang: a check that cannot finish in its budget returns reward 0 and the flag
`timeout`. Verifiers are looked up by name once, at build time; the loop never re-tests names.
Registration is lazy ("module:attr" strings) so that importing the registry imports no verifier.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from rlvr.types import Problem, Score


@runtime_checkable
class Verifier(Protocol):
    name: str

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        """Score responses[i] against problems[i]. Never raises on model output."""
        ...

    def check_reference(self, problem: Problem) -> None:
        """Raise ValueError naming the problem when its reference cannot be used (load time)."""
        ...


_REGISTRY: dict[str, str | Callable[..., Verifier]] = {
    "math": "rlvr.verifiers.math:MathVerifier",
    "constraints": "rlvr.verifiers.constraints:ConstraintsVerifier",
    "format": "rlvr.verifiers.format:FormatVerifier",
    "code": "rlvr.verifiers.code:CodeVerifier",
    "arithmetic": "rlvr.tasks.arithmetic:ArithmeticVerifier",
    "composite": "rlvr.verifiers.compose:CompositeVerifier",
    "router": "rlvr.verifiers.compose:RoutingVerifier",
    "overlong": "rlvr.verifiers.shaping:overlong_verifier",
    "length_budget": "rlvr.verifiers.shaping:length_budget_verifier",
    "language_consistency": "rlvr.verifiers.shaping:language_consistency_verifier",
}


def register_verifier(name: str, factory: str | Callable[..., Verifier]) -> None:
    """Register a verifier factory (a callable taking keyword options, or a "module:attr" path)."""
    _REGISTRY[name] = factory


def verifier_names() -> list[str]:
    return sorted(_REGISTRY)


def get_verifier(name: str, **options: Any) -> Verifier:
    """Build the verifier registered under `name` with keyword `options`."""
    if name not in _REGISTRY:
        raise KeyError(f"unknown verifier {name!r}; known: {', '.join(verifier_names())}")
    factory = _REGISTRY[name]
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory(**options)


class CallableVerifier:
    """Wraps a TRL-style reward function `f(completions, **columns) -> list[float]` unchanged.

    Columns are the problem's metadata plus `prompts` and `reference` (TRL passes dataset columns
    as keyword lists). A reward > 0 counts as correct; exceptions give reward 0 and flag `crash`.
    """

    def __init__(self, fn: Callable[..., Sequence[float]], name: str | None = None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "callable")

    def check_reference(self, problem: Problem) -> None:
        return None

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        columns: dict[str, list[Any]] = {"prompts": [p.prompt for p in problems],
                                         "reference": [p.reference for p in problems]}
        for key in {k for p in problems for k in p.metadata}:
            columns[key] = [p.metadata.get(key) for p in problems]
        try:
            rewards = list(self.fn(list(responses), **columns))
        except Exception as exc:  # a user reward function must not crash the run
            return [Score(0.0, False, ("crash",), details={"error": repr(exc)}) for _ in responses]
        return [Score(float(r or 0.0), bool(r and r > 0), ()) for r in rewards]
