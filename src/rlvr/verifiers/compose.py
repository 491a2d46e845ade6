"""Composition of verifiers: weighted sums per task, and routing by each problem's verifier name.

`as_verifier(x)` accepts a `Verifier`, a registry name, or a TRL reward function
`f(prompts, completions, **kwargs) -> list[float | None]` (wrapped unchanged by `CallableVerifier`).

`CompositeVerifier(terms=[...])` scores every response with each term and sums `weight × reward`.
`correct` comes from the primary term (the first, unless one is marked `"primary": true`); flags
are the union over terms; `details["terms"]` holds each term's reward and `details["weights"]` its
weight (`reward_terms` reads both, for `grpo.reward_norm: per_term`). Example, for math with a
small format term and DAPO's overlong penalty:

    CompositeVerifier(terms=[{"verifier": "math"},
                             {"verifier": "format", "weight": 0.1, "options": {"answer": "boxed"}},
                             {"verifier": "overlong", "options": {"max_length": 4096,
                                                                  "cache_length": 512}}])

`RoutingVerifier` sends each problem to the verifier named by `problem.verifier` (built once per
name, on first use, from `options[name]`), so one batch can mix math, code and constraint problems;
each verifier still sees its problems as one batch. Not guaranteed: an order of evaluation between
terms (terms must be independent).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from rlvr.types import Problem, Score
from rlvr.verifiers.base import CallableVerifier, Verifier, get_verifier, score_with_ids


def as_verifier(spec: Verifier | str | Callable[..., Sequence[float]], **options: Any) -> Verifier:
    """A verifier from an instance, a registry name (built with `options`) or a TRL callable."""
    if isinstance(spec, str):
        return get_verifier(spec, **options)
    if hasattr(spec, "score_batch") and hasattr(spec, "check_reference"):
        return spec  # type: ignore[return-value]
    if callable(spec):
        return CallableVerifier(spec)
    raise TypeError(f"cannot use {spec!r} as a verifier")


def _term(spec: Any) -> tuple[Verifier, float, bool]:
    if isinstance(spec, Mapping):
        verifier = as_verifier(spec["verifier"], **dict(spec.get("options") or {}))
        return verifier, float(spec.get("weight", 1.0)), bool(spec.get("primary", False))
    return as_verifier(spec), 1.0, False


class CompositeVerifier:
    name = "composite"
    takes_token_ids = True   # handed on to the terms that take them (token-length shaping)

    def __init__(self, *, terms: Sequence[Any]):
        if not terms:
            raise ValueError("a composite verifier needs at least one term")
        built = [_term(t) for t in terms]
        self.verifiers = [v for v, _, _ in built]
        self.weights = [w for _, w, _ in built]
        marked = [i for i, (_, _, primary) in enumerate(built) if primary]
        self.primary = marked[0] if marked else 0

    def check_reference(self, problem: Problem) -> None:
        for verifier in self.verifiers:
            verifier.check_reference(problem)

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem],
                    token_ids: Sequence[Sequence[int]] | None = None) -> list[Score]:
        per_term = [_score(v, responses, problems, token_ids) for v in self.verifiers]
        out = []
        for i in range(len(responses)):
            scores = [term[i] for term in per_term]
            reward = sum(w * s.reward for w, s in zip(self.weights, scores))
            flags = tuple(dict.fromkeys(f for s in scores for f in s.flags))
            main = scores[self.primary]
            details = dict(main.details or {})
            details["terms"] = {v.name: s.reward for v, s in zip(self.verifiers, scores)}
            details["weights"] = {v.name: w for v, w in zip(self.verifiers, self.weights)}
            out.append(Score(reward, main.correct, flags, main.extracted, details))
        return out


def _score(verifier: Verifier, responses: Sequence[str], problems: Sequence[Problem],
           token_ids: Sequence[Sequence[int]] | None) -> list[Score]:
    if token_ids is None:
        return list(verifier.score_batch(responses, problems))
    return score_with_ids(verifier, responses, problems, token_ids)


def _terms(score: Score | None) -> tuple[dict[str, float | None], dict[str, float]]:
    """(term rewards, term weights) of one score; a score without terms is one term "reward"."""
    details = (score.details or {}) if score else {}
    if "terms" not in details:
        return {"reward": score.reward if score else 0.0}, {"reward": 1.0}
    if "weights" not in details:   # a guess of 1.0 would normalise with the wrong weights
        raise ValueError(f"a score's terms {sorted(details['terms'])} come without their weights; "
                         "grpo.reward_norm=per_term needs both (details['weights'])")
    return details["terms"], details["weights"]


def reward_terms(groups: Sequence[Any]) -> tuple[list[list[list[float | None]]], list[float]]:
    """Each completion's term rewards as [P][G][K] (None: the term did not apply) and the K
    weights, over the union of the batch's term names (for `grpo.reward_norm: per_term`).
    Raises ValueError when one term name carries two weights."""
    weights: dict[str, float] = {}
    for g in groups:
        for c in g.completions:
            for name, w in _terms(c.score)[1].items():
                if weights.setdefault(name, float(w)) != float(w):
                    raise ValueError(f"reward term {name!r} has weights {weights[name]} and {w}")
    names = list(weights)
    return ([[[_terms(c.score)[0].get(n) for n in names] for c in g.completions] for g in groups],
            [weights[n] for n in names])


class RoutingVerifier:
    """Scores each problem with the verifier its `problem.verifier` names."""

    name = "router"
    takes_token_ids = True

    def __init__(self, *, verifiers: Mapping[str, Any] | None = None,
                 options: Mapping[str, Mapping[str, Any]] | None = None):
        self._given = dict(verifiers or {})
        self._options = {k: dict(v) for k, v in (options or {}).items()}
        self._built: dict[str, Verifier] = {}

    def verifier_for(self, name: str) -> Verifier:
        if name not in self._built:
            spec = self._given.get(name, name)
            self._built[name] = as_verifier(spec, **self._options.get(name, {}))
        return self._built[name]

    def check_reference(self, problem: Problem) -> None:
        try:
            verifier = self.verifier_for(problem.verifier)
        except KeyError as exc:
            raise ValueError(f"problem {problem.id}: {exc.args[0]}") from None
        verifier.check_reference(problem)

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem],
                    token_ids: Sequence[Sequence[int]] | None = None) -> list[Score]:
        by_name: dict[str, list[int]] = {}
        for i, problem in enumerate(problems):
            by_name.setdefault(problem.verifier, []).append(i)
        out: list[Score | None] = [None] * len(responses)
        for name, idx in by_name.items():
            try:
                verifier = self.verifier_for(name)
            except KeyError:
                for i in idx:
                    out[i] = Score(0.0, False, ("unknown_verifier",), details={"verifier": name})
                continue
            scores = _score(verifier, [responses[i] for i in idx], [problems[i] for i in idx],
                            None if token_ids is None else [token_ids[i] for i in idx])
            for i, score in zip(idx, scores):
                out[i] = score
        return out  # type: ignore[return-value]
