"""Held-out evaluation: greedy accuracy, and pass@k / maj@k / mean@k from k samples.

pass@k uses the unbiased estimator of Chen et al. (arXiv:2107.03374) over n ≥ k samples; maj@k
votes over the verifier's extracted answers. These functions take an engine and verifiers, so the
same code runs during training (periodic evals) and in `rlvr eval`.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from rlvr.algo.passk import majority_vote, pass_at_k
from rlvr.rollout.base import SamplingParams
from rlvr.types import Group, Problem


def score_groups(groups: Sequence[Group], verifiers: dict) -> None:
    """Attach a Score to every completion, one `score_batch` call per group."""
    for group in groups:
        verifier = verifiers[group.problem.verifier]
        texts = [c.text for c in group.completions]
        scores = verifier.score_batch(texts, [group.problem] * len(texts))
        for c, s in zip(group.completions, scores):
            c.score = s


def greedy_accuracy(engine, problems: Sequence[Problem], verifiers: dict, max_new_tokens: int,
                    batch: int = 256) -> dict[str, float]:
    params = SamplingParams(max_new_tokens=max_new_tokens, greedy=True)
    correct = flags = 0
    lengths = []
    for start in range(0, len(problems), batch):
        groups = engine.generate(problems[start:start + batch], 1, params, seed=0)
        score_groups(groups, verifiers)
        for g in groups:
            c = g.completions[0]
            correct += bool(c.score.correct)
            flags += bool(c.score.flags)
            lengths.append(len(c.token_ids))
    n = max(1, len(problems))
    return {"eval/accuracy": correct / n, "eval/heldout_size": len(problems),
            "eval/flagged_fraction": flags / n,
            "eval/mean_length": sum(lengths) / max(1, len(lengths))}


def sampled_metrics(groups: Sequence[Group], ks: Sequence[int]) -> dict[str, float]:
    """pass@k, maj@k and mean@k over scored groups of n samples each (k ≤ n)."""
    out: dict[str, float] = {}
    n = min(len(g.completions) for g in groups)
    for k in ks:
        if k > n:
            continue
        out[f"pass@{k}"] = sum(pass_at_k(n, sum(c.score.correct for c in g.completions), k)
                               for g in groups) / len(groups)
        out[f"maj@{k}"] = sum(_majority_correct(g, k) for g in groups) / len(groups)
    out["mean@n"] = sum(sum(c.score.correct for c in g.completions) / len(g.completions)
                        for g in groups) / len(groups)
    return out


def _majority_correct(group: Group, k: int) -> float:
    """Whether the majority answer among the first k samples is a correct one."""
    first = group.completions[:k]
    winner = majority_vote([c.score.extracted for c in first])
    if winner is None:
        return 0.0
    return float(any(c.score.correct and c.score.extracted == winner for c in first))


def answer_histogram(group: Group) -> Counter:
    return Counter(c.score.extracted for c in group.completions if c.score and c.score.extracted)
