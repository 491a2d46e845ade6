"""Math verifier: strict final-answer extraction, an exact fast path, math-verify in killable workers.

A response earns reward 1 when its single final answer equals the reference. The steps:

1. extract candidate answers from the final-answer region (`extract`, policy per dataset via
   `extract=` or per problem via `metadata["extract"]`); none → reward 0, flag `no_answer`;
2. strictness: two or more *different* answers (two boxes, "3 or 4", a list where the reference is a
   single value, two boxes joined by a relation) → reward 0, flag `multiple_answers`; what each
   answer and the reference claim is read first (`claims`: dataset-style references, an
   equation's right side, the exact value before `\\approx`, the option letter not ruled out);
3. plain numbers are compared exactly in-process (`fast`), also against a reference that
   evaluates to a number (its value is computed once per new reference, in a worker); everything else
   goes to math-verify in a worker process under a hard budget (`timeout_s`, default 5 s: a check
   that takes 0.5 s alone takes several on a loaded machine, and a correct answer that times out
   scores 0); overrun → reward 0, flag `timeout`, and the worker is killed and replaced; an
   inequality against an interval (`x > 3` vs `(3, \\infty)`) is compared in-process;
4. verdicts are cached on (normalised answer, reference), and `score_batch` dedupes identical
   responses of a group, so a group of G equal answers costs one check.

Guaranteed: `score_batch` never raises on model output and each symbolic check returns within its
budget. A reference that cannot be parsed is rejected by `check_reference` (load time); if one
reaches `score_batch` anyway it scores 0 with flag `bad_reference`. Not guaranteed: that math-verify
accepts every notation a human grader would (see tests/unit/test_verifier_math_truth.py).
"""

from __future__ import annotations

import threading
import time
from fractions import Fraction
from functools import lru_cache
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from rlvr.types import Problem, Score
from rlvr.verifiers.math.claims import chosen_options, equation_claim, reference_form, split_approx
from rlvr.verifiers.math.extract import (POLICIES, boxed_contents, extract_candidates, final_region,
                                         is_hedge, split_parts)
from rlvr.verifiers.math.forms import (as_interval, as_list, decimal_comma, drop_remark, expand_pm,
                                       one_value, text_key)
from rlvr.verifiers.math.fast import (Number, fast_equal, normalize, number_vs_shape,
                                      numbers_equal, same_when_rounded, to_number)
from rlvr.verifiers.workers import WorkerPool

_SYMBOLIC = "rlvr.verifiers.math.symbolic"
_MAX_CANDIDATES = 20
# Checks each worker runs before it takes work, so that latex2sympy's and sympy's first-call
# set-up (hundreds of ms) is not charged to the budget of a real check. Kept short: a worker
# killed on overrun is replaced with the same warm-up, and the pool is one worker short meanwhile.
_WARMUP = tuple((f"{_SYMBOLIC}:symbolic_equal", pair) for pair in (
    ("3\\sqrt{2}", "\\sqrt{18}"), ("\\{1,2\\}", "(1, 2]"), ("y = 2x - 3", "y=2x+3"),
    ("x > a", "(a, \\infty)"), ("(3, \\frac{\\pi}{2})", "\\left(3, \\frac{\\pi}{2}\\right)")))


class _Plan:
    """What one unique (response, reference) needs: a final score, or a symbolic check."""

    __slots__ = ("score", "answer", "reference", "source")

    def __init__(self, score: Score | None = None, answer: str = "", reference: str = "",
                 source: str = ""):
        self.score, self.answer, self.reference, self.source = score, answer, reference, source


class MathVerifier:
    name = "math"

    def __init__(self, *, extract: str = "auto", timeout_s: float = 5.0, workers: int = 2,
                 cache_size: int = 100_000, max_answer_chars: int = 1000):
        if extract not in POLICIES:
            raise ValueError(f"extract must be one of {', '.join(POLICIES)}, got {extract!r}")
        self.extract = extract
        self.timeout_s = float(timeout_s)
        self.max_answer_chars = max_answer_chars
        self.pool = WorkerPool(workers, preload=(_SYMBOLIC, "math_verify"), warmup=_WARMUP)
        self._cache: OrderedDict[tuple[str, str], tuple[bool, tuple[str, ...]]] = OrderedDict()
        self._cache_size = cache_size
        self._values: dict[str, tuple | None] = {}
        self._lock = threading.Lock()
        self._threads = ThreadPoolExecutor(max_workers=max(1, workers))

    def check_reference(self, problem: Problem) -> None:
        policy = problem.metadata.get("extract", self.extract)
        if policy not in POLICIES:
            raise ValueError(f"problem {problem.id}: unknown extract policy {policy!r}")
        ref = _reference_text(problem.reference)
        if ref is None:
            raise ValueError(f"problem {problem.id}: math reference is missing or empty")
        if to_number(ref) is not None:
            return
        out = self.pool.run(f"{_SYMBOLIC}:reference_ok", (expand_pm(ref),), self.timeout_s)
        if out.status != "ok" or not out.value:
            why = "timed out" if out.status == "timeout" else "cannot be parsed"
            raise ValueError(f"problem {problem.id}: math reference {ref!r} {why}")

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        keys = [(r if isinstance(r, str) else str(r), _reference_text(p.reference),
                 p.metadata.get("extract", self.extract)) for r, p in zip(responses, problems)]
        self._learn_values([ref for _, ref, _ in keys])
        plans = {key: self._plan(*key) for key in dict.fromkeys(keys)}
        self._run_symbolic([plan for plan in plans.values() if plan.score is None])
        return [plans[key].score for key in keys]  # type: ignore[misc]

    def score(self, response: str, reference: Any, extract: str | None = None) -> Score:
        """Score one response against one reference answer (convenience over `score_batch`)."""
        problem = Problem("-", "", reference, metadata={"extract": extract or self.extract})
        return self.score_batch([response], [problem])[0]

    def _plan(self, response: str, ref: str | None, policy: str) -> _Plan:
        t0 = time.perf_counter()
        if ref is None:
            return _Plan(Score(0.0, False, ("bad_reference",)))
        if policy not in POLICIES:
            return _Plan(Score(0.0, False, ("bad_reference",), details={"extract": policy}))
        candidates, source = extract_candidates(response, policy)
        option = _option_letter(ref)
        if option:
            candidates = _options_chosen(candidates, response)
        if not candidates:
            return _Plan(Score(0.0, False, ("no_answer",), details=_details(t0, source, "none")))
        candidates = list(dict.fromkeys(candidates))[:_MAX_CANDIDATES + 1]  # more are a hedge anyway
        ref, candidates = expand_pm(ref), [expand_pm(drop_remark(c)) for c in candidates]
        single = _single_valued(ref)
        if single:  # `\frac{\sqrt3}{3} \approx 0.577`: the exact value is the claim
            candidates = [split_approx(c) for c in candidates]
        if single and any(is_hedge(c) for c in candidates) and not is_hedge(ref):
            return _Plan(Score(0.0, False, ("multiple_answers",), " | ".join(candidates),
                               _details(t0, source, "strict")))
        if single:
            ref = decimal_comma(ref)
            candidates = [equation_claim(one_value(c, ref), ref) for c in candidates]
        answers = _distinct(candidates, single)
        extracted = " | ".join(answers)
        if len(answers) > 1:
            return _Plan(Score(0.0, False, ("multiple_answers",), extracted,
                               _details(t0, source, "strict")))
        answer = answers[0]
        if not single:  # the same set written another way: "6 and 8" for "6, 8"
            answer, ref = as_list(answer), as_list(ref)
        return self._judge(t0, source, answer, ref)

    def _judge(self, t0: float, source: str, answer: str, ref: str) -> _Plan:
        """The plan for the one answer left: decided here unless only the symbolic worker can."""
        if len(answer) > self.max_answer_chars:
            return _Plan(Score(0.0, False, ("too_long",), answer[:200], _details(t0, source, "strict")))
        verdict = fast_equal(*_as_intervals(answer, ref))
        if verdict is None:
            verdict = self._number_vs_value(answer, ref)
        if verdict is None:
            verdict = number_vs_shape(answer, ref)
        if verdict is not None:
            return _Plan(Score(float(verdict), verdict, (), answer, _details(t0, source, "fast")))
        cached = self._cache_get((normalize(answer), ref))
        if cached is not None:
            ok, flags = cached
            return _Plan(Score(float(ok), ok, flags, answer, _details(t0, source, "cache")))
        return _Plan(None, answer, ref, source)

    def _number_vs_value(self, answer: str, ref: str) -> bool | None:
        """A plain-number answer against a reference that evaluates to a number (`2\\pi`), decided
        here from the reference's value, which one worker call per reference computes."""
        number = to_number(answer)
        if number is None:
            return None
        with self._lock:
            value = self._values.get(ref)
        if value is None:
            return None
        if value[0] == "rational":
            return numbers_equal(number, Number(Fraction(value[1], value[2]), False, False))
        # An irrational reference equals no plain number; a decimal may round to it (6 places).
        # Near misses go to sympy, which knows when an unevaluated form is rational after all.
        real = Fraction(value[1])
        candidates = [number.value] + ([number.value / 100] if number.percent else [])
        if number.decimal and any(same_when_rounded(c, real) for c in candidates):
            return True
        if any(abs(c - real) < Fraction(1, 10**9) for c in candidates):
            return None
        return False

    def _learn_values(self, refs: Sequence[str | None]) -> None:
        """Evaluate new symbolic references once each (in workers, in parallel) for the number path."""
        with self._lock:
            new = [r for r in dict.fromkeys(refs)
                   if r is not None and r not in self._values and to_number(r) is None]
        outs = self._threads.map(
            lambda r: self.pool.run(f"{_SYMBOLIC}:numeric_value", (r,), self.timeout_s), new)
        with self._lock:
            for ref, out in zip(new, outs):
                self._values[ref] = out.value if out.status == "ok" else None
            while len(self._values) > self._cache_size:
                self._values.pop(next(iter(self._values)))

    def _run_symbolic(self, pending: list[_Plan]) -> None:
        by_key: dict[tuple[str, str], list[_Plan]] = {}
        for plan in pending:
            by_key.setdefault((normalize(plan.answer), plan.reference), []).append(plan)
        unique = [(key, plans[0]) for key, plans in by_key.items()]
        verdicts = self._threads.map(lambda kp: self._check(kp[1].answer, kp[1].reference), unique)
        for (key, _), (ok, flags, ms) in zip(unique, verdicts):
            self._cache_put(key, (ok, flags))
            for plan in by_key[key]:
                details = {"source": plan.source, "path": "symbolic", "ms": round(ms, 3)}
                plan.score = Score(float(ok), ok, flags, plan.answer, details)

    def _check(self, answer: str, ref: str) -> tuple[bool, tuple[str, ...], float]:
        out = self.pool.run(f"{_SYMBOLIC}:symbolic_equal", (answer, ref), self.timeout_s)
        if out.status == "ok":
            return bool(out.value), (), out.ms
        return False, (out.status,), out.ms

    def _cache_get(self, key: tuple[str, str]) -> tuple[bool, tuple[str, ...]] | None:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
            return hit

    def _cache_put(self, key: tuple[str, str], value: tuple[bool, tuple[str, ...]]) -> None:
        with self._lock:
            self._cache[key] = value
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def close(self) -> None:
        self._threads.shutdown(wait=False)
        self.pool.close()


def _reference_text(reference: Any) -> str | None:
    if isinstance(reference, bool) or reference is None:
        return None
    if isinstance(reference, (int, float)):
        return repr(reference)
    if isinstance(reference, str) and reference.strip():
        return _reference_string(reference)
    return None


@lru_cache(maxsize=65536)  # every response of a group carries the same reference
def _reference_string(reference: str) -> str | None:
    boxes = boxed_contents(reference)  # a reference written as a worked answer: its boxes
    if boxes:
        return ", ".join(boxes)
    text = reference.strip().strip("$").strip()
    return reference_form(text, lambda s: extract_candidates(s, "auto")[0]) if text else None


def _option_letter(ref: str) -> str:
    """The option letter a multiple-choice reference names (`D`, `(D)`, `\\text{(D)}`), or ""."""
    word = text_key(ref)
    return word.upper() if word and len(word) == 1 and word in "abcde" else ""


def _options_chosen(candidates: list[str], response: str) -> list[str]:
    """Against an option-letter reference: an answer that rules letters out ("D, it can't be A or
    B") is the letter it keeps; with no candidate at all, the letters of the closing line are read
    that way ("The correct choice is B."; two letters left are two answers)."""
    if not candidates:
        lines = final_region(response).strip().splitlines()
        chosen = chosen_options(lines[-1][-300:], always=True) if lines else None
        return [f"({c})" for c in chosen or []]
    out = []
    for candidate in candidates:
        chosen = chosen_options(candidate)
        out.extend([candidate] if chosen is None else [f"({c})" for c in chosen] or [candidate])
    return out


def _single_valued(ref: str) -> bool:
    """Whether the reference is one value: not a list, set, tuple or interval, nor `a \\pm b`."""
    if "\\pm" in ref or "\\mp" in ref:
        return False
    parts = split_parts(ref)  # thousands separators are gone from these
    return len(parts) <= 1 and "," not in (parts[0] if parts else "")


def _as_intervals(answer: str, ref: str) -> tuple[str, str]:
    """An inequality against an interval (`x > 3` vs `(3, \\infty)`) as two intervals, which the fast
    path compares exactly; sympy's relational solver takes a second or more on a loaded machine."""
    if ref.lstrip()[:1] in "([" and (interval := as_interval(answer)):
        return interval, ref
    if answer.lstrip()[:1] in "([" and (interval := as_interval(ref)):
        return answer, interval
    return answer, ref


def _details(t0: float, source: str, path: str) -> dict[str, Any]:
    return {"source": source, "path": path, "ms": round((time.perf_counter() - t0) * 1000, 3)}


def _distinct(candidates: list[str], single: bool) -> list[str]:
    """The different answers among the candidates (parts of each, when one value is expected).

    Linear in the number of candidates; past `_MAX_CANDIDATES` different strings the answer is
    a hedge whatever their values, and the rest are not read.
    """
    unique = list(dict.fromkeys(candidates))
    if single:
        unique = list(dict.fromkeys(part for c in unique[:_MAX_CANDIDATES] for part in split_parts(c)))
    else:
        unique = [", ".join(unique)]
    if len(unique) > _MAX_CANDIDATES:
        return unique[:_MAX_CANDIDATES]
    by_value: dict[tuple, str] = {}
    for part in unique:
        number = to_number(part)
        key = ("number", number.value, number.percent) if number else ("text", normalize(part))
        by_value.setdefault(key, part)
    return list(by_value.values()) or candidates[:1]
