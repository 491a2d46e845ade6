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
    "code": "rlvr.verifiers.code:code_verifier",
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


def _factory(name: str) -> Callable[..., Verifier]:
    if name not in _REGISTRY:
        raise KeyError(f"unknown verifier {name!r}; known: {', '.join(verifier_names())}")
    factory = _REGISTRY[name]
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory


def get_verifier(name: str, **options: Any) -> Verifier:
    """Build the verifier registered under `name` with keyword `options`."""
    return _factory(name)(**options)


def verifier_options(name: str) -> list[str] | None:
    """The keyword options the verifier registered under `name` takes (None: any keyword)."""
    import inspect

    params = inspect.signature(_factory(name)).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return sorted(p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


class CallableVerifier:
    """Wraps a TRL reward function `f(prompts, completions, **kwargs) -> list[float | None]`
    unchanged, in this process (for the Python API; configs name functions through
    `reward_funcs.RewardFunctionsVerifier`, which runs them in worker processes).

    It is called as TRL calls it (see `reward_funcs.trl_kwargs`). A reward > 0 counts as correct;
    None ("not applicable") gives 0 and the flag `unscorable`; an exception or a list of the wrong
    length gives reward 0 and the flag `crash`.
    """

    takes_token_ids = True

    def __init__(self, fn: Callable[..., Sequence[float | None]], name: str | None = None):
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", "callable"))

    def check_reference(self, problem: Problem) -> None:
        return None

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem],
                    token_ids: Sequence[Sequence[int]] | None = None) -> list[Score]:
        from rlvr.verifiers.trl_call import check_rewards, trl_kwargs

        try:
            rewards = check_rewards(self.fn(**trl_kwargs(responses, problems, token_ids)), len(responses))
        except Exception as exc:  # a user reward function must not crash the run
            import traceback

            error = {"error": f"{type(exc).__name__}: {exc}"[:500], "flag": "crash",
                     "traceback": traceback.format_exc()[-4000:]}
            return [Score(0.0, False, ("crash",), details={"error": repr(exc),
                                                           "term_errors": {self.name: error}})
                    for _ in responses]
        return [Score(0.0, False, ("unscorable",)) if r is None else Score(r, r > 0, ())
                for r in rewards]


def score_with_ids(verifier: Verifier, responses: Sequence[str], problems: Sequence[Problem],
                   token_ids: Sequence[Sequence[int]]) -> list[Score]:
    """`verifier.score_batch`, passing the sampled token ids to verifiers that take them (TRL
    reward functions receive them as `completion_ids`)."""
    if getattr(verifier, "takes_token_ids", False):
        return list(verifier.score_batch(responses, problems, token_ids=token_ids))  # type: ignore[call-arg]
    return list(verifier.score_batch(responses, problems))
