"""pass@k and maj@k estimators from n sampled answers per problem.

Guaranteed: pass_at_k is the exact unbiased estimator of Chen et al.; maj_at_k is the exact
expectation over k-subsets whenever there are at most `max_subsets` of them, otherwise a seeded
Monte Carlo estimate (deterministic for a given seed). Not guaranteed: answer equivalence —
majority voting compares strings exactly, so callers must canonicalise answers first (e.g. the
verifier's `extracted` answer, normalised), or equivalent answers split their votes.
"""

from __future__ import annotations

import itertools
import math
import random
from functools import partial
from typing import Callable, Sequence, Union

Answer = Union[str, None]
CorrectFn = Callable[[int, str], bool]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct (Chen et al., arXiv:2107.03374).

    pass@k = 1 − C(n−c, k) / C(n, k), computed as 1 − Π_{i=n−c+1..n} (1 − k/i): the paper's
    numerically stable product form, which never forms the (huge) binomials.
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_pass_at_k(ns: Sequence[int], cs: Sequence[int], k: int) -> float:
    """Mean of pass_at_k over problems (problem i has ns[i] samples, cs[i] of them correct)."""
    if len(ns) != len(cs) or not ns:
        raise ValueError(f"need equal, non-empty ns and cs; got {len(ns)} and {len(cs)}")
    return sum(pass_at_k(n, c, k) for n, c in zip(ns, cs)) / len(ns)


def majority_vote(answers: Sequence[Answer]) -> Answer:
    """The most frequent answer; None (no answer) never wins; ties go to the earliest answer.

    Returns None only when every answer is None (or there are none).
    """
    counts: dict[str, int] = {}
    for a in answers:
        if a is not None:
            counts[a] = counts.get(a, 0) + 1
    best: Answer = None
    for a, count in counts.items():  # dicts keep first-occurrence order, so ties keep the first
        if best is None or count > counts[best]:
            best = a
    return best


def _subsets(n: int, k: int, max_subsets: int, rng: random.Random):
    if math.comb(n, k) <= max_subsets:
        return list(itertools.combinations(range(n), k))
    # sorted so that each subset keeps the samples' original order (ties → earliest sample)
    return [tuple(sorted(rng.sample(range(n), k))) for _ in range(max_subsets)]


def maj_at_k_one(answers: Sequence[Answer], is_correct: Callable[[str], bool], k: int, *,
                 max_subsets: int = 2000, seed: int = 0) -> float:
    """Probability that the majority answer of k samples drawn without replacement from
    `answers` is correct. Exact (all C(n, k) subsets) when C(n, k) <= max_subsets, else the mean
    over max_subsets random subsets. Subsets keep sample order, so ties go to the earliest sample.
    """
    n = len(answers)
    if not 1 <= k <= n:
        raise ValueError(f"maj@k needs 1 <= k <= n; got n={n}, k={k}")
    verdict = {a: bool(is_correct(a)) for a in dict.fromkeys(a for a in answers if a is not None)}
    subsets = _subsets(n, k, max_subsets, random.Random(seed))
    hits = 0
    for idx in subsets:
        winner = majority_vote([answers[i] for i in idx])
        hits += winner is not None and verdict[winner]
    return hits / len(subsets)


def maj_at_k(answers_per_problem: Sequence[Sequence[Answer]],
             correct_fn_or_refs: Union[CorrectFn, Sequence[str]], k: int, *,
             max_subsets: int = 2000, seed: int = 0) -> float:
    """maj@k (self-consistency, Wang et al., arXiv:2203.11171) averaged over problems.

    With n >= k samples per problem we estimate the expectation over k-subsets (see
    `maj_at_k_one`) rather than voting over the first k samples, which would waste n − k samples
    and have a much larger variance. `correct_fn_or_refs` is either a callable
    `fn(problem_index, answer) -> bool` or one reference string per problem (exact match).
    """
    if not answers_per_problem:
        raise ValueError("maj@k needs at least one problem")
    fn: CorrectFn
    if callable(correct_fn_or_refs):
        fn = correct_fn_or_refs
    else:
        refs = list(correct_fn_or_refs)
        if len(refs) != len(answers_per_problem):
            raise ValueError(f"got {len(refs)} references for {len(answers_per_problem)} problems")
        fn = lambda i, a: a == refs[i]  # noqa: E731
    scores = [maj_at_k_one(answers, partial(fn, i), k,
                           max_subsets=max_subsets, seed=seed + i)
              for i, answers in enumerate(answers_per_problem)]
    return sum(scores) / len(scores)
