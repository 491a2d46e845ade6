"""Held-out evaluation: greedy accuracy, and pass@k / maj@k / mean@k from n samples per problem.

pass@k is the unbiased estimator of Chen et al. (arXiv:2107.03374) over n ≥ k samples. maj@k is the
expected self-consistency accuracy (Wang et al., arXiv:2203.11171) of k samples drawn from the n,
voting over the verifier's `Score.extracted` answers (exact over all k-subsets when there are few,
else a seeded Monte Carlo estimate; see `rlvr.algo.passk`). mean@k is the accuracy averaged over
the first k samples. These functions take an engine and verifiers, so the same code runs during
training (periodic evals) and in `rlvr eval`.

Not guaranteed: maj@k is only as good as the verifier's canonicalisation of answers. Verifiers
that extract nothing (e.g. wrapped TRL reward functions) give maj@k = 0, and `has_answers` says so.
"""

from __future__ import annotations

from typing import Sequence

from rlvr.algo.passk import maj_at_k_one, pass_at_k
from rlvr.rollout.base import SamplingParams
from rlvr.types import Group, Problem, Score
from rlvr.verifiers.base import score_with_ids


def score_groups(groups: Sequence[Group], verifiers: dict) -> None:
    """Attach a Score to every completion, one `score_batch` call per group.

    A verifier that raises (a bug, a dead worker it could not replace) costs that group reward 0
    and the flag `verifier_error`, counted in the metrics; it never stops a run.
    """
    for group in groups:
        verifier = verifiers[group.problem.verifier]
        texts = [c.text for c in group.completions]
        try:
            scores = score_with_ids(verifier, texts, [group.problem] * len(texts),
                                    [c.token_ids for c in group.completions])
            if len(scores) != len(texts):
                raise RuntimeError(f"{len(scores)} scores for {len(texts)} completions")
        except Exception as exc:  # noqa: BLE001 - any verifier failure becomes a flagged zero
            error = f"{type(exc).__name__}: {exc}"[:500]
            scores = [Score(0.0, False, ("verifier_error",), details={"error": error})] * len(texts)
        for c, s in zip(group.completions, scores):
            c.score = s


def greedy_accuracy(engine, problems: Sequence[Problem], verifiers: dict, max_new_tokens: int,
                    batch: int = 256) -> dict[str, float]:
    """Greedy accuracy, reward and more on `problems`; with several verifiers also
    `eval/<verifier>/accuracy` and `eval/<verifier>/reward` for each."""
    params = SamplingParams(max_new_tokens=max_new_tokens, greedy=True)
    correct = flags = 0
    lengths, rewards = [], []
    per: dict[str, list[tuple[float, bool]]] = {}
    for start in range(0, len(problems), batch):
        groups = engine.generate(problems[start:start + batch], 1, params, seed=0)
        score_groups(groups, verifiers)
        for g in groups:
            c = g.completions[0]
            correct += bool(c.score.correct)
            flags += bool(c.score.flags)
            lengths.append(len(c.token_ids))
            rewards.append(c.score.reward)
            per.setdefault(g.problem.verifier, []).append((c.score.reward, bool(c.score.correct)))
    n = max(1, len(problems))
    out = {"eval/accuracy": correct / n, "eval/reward": sum(rewards) / n,
           "eval/heldout_size": len(problems), "eval/flagged_fraction": flags / n,
           "eval/mean_length": sum(lengths) / max(1, len(lengths))}
    if len(per) > 1:
        for name, rows in sorted(per.items()):
            out[f"eval/{name}/reward"] = sum(r for r, _ in rows) / len(rows)
            out[f"eval/{name}/accuracy"] = sum(ok for _, ok in rows) / len(rows)
    return out


def correct_counts(groups: Sequence[Group]) -> list[int]:
    """Number of correct completions per group (the c of pass@k)."""
    return [sum(bool(c.score and c.score.correct) for c in g.completions) for g in groups]


def group_size(groups: Sequence[Group]) -> int:
    """The n that every k is checked against: the smallest group's size."""
    return min(len(g.completions) for g in groups)


def group_maj_at_k(group: Group, k: int, seed: int = 0) -> float:
    """maj@k of one scored group: chance that the vote of k of its samples is a correct answer.

    An extracted answer counts as correct when the verifier marked any completion with that answer
    correct (a verifier's verdict depends on the answer, not on the reasoning around it).
    """
    answers = [c.score.extracted if c.score else None for c in group.completions]
    good = {c.score.extracted for c in group.completions if c.score and c.score.correct}
    return maj_at_k_one(answers, lambda a: a in good, k, seed=seed)


def has_answers(groups: Sequence[Group]) -> bool:
    """Whether the verifier extracted any answer at all (otherwise maj@k is meaningless)."""
    return any(c.score and c.score.extracted is not None for g in groups for c in g.completions)


def sampled_metrics(groups: Sequence[Group], ks: Sequence[int], seed: int = 0) -> dict[str, float]:
    """pass@k, maj@k and mean@k over scored groups of n samples each; k > n is skipped."""
    out: dict[str, float] = {}
    n, counts = group_size(groups), correct_counts(groups)
    for k in sorted(set(ks)):
        if k > n:
            continue
        out[f"pass@{k}"] = sum(pass_at_k(len(g.completions), c, k)
                               for g, c in zip(groups, counts)) / len(groups)
        out[f"maj@{k}"] = sum(group_maj_at_k(g, k, seed + i)
                              for i, g in enumerate(groups)) / len(groups)
        out[f"mean@{k}"] = sum(sum(bool(c.score and c.score.correct) for c in g.completions[:k]) / k
                               for g in groups) / len(groups)
    return out


def vote_curve(groups: Sequence[Group], seed: int = 0) -> list[dict[str, float]]:
    """maj@k and pass@k for k = 1, 2, 4, ... up to n (n itself included)."""
    n = group_size(groups)
    ks = sorted({2 ** i for i in range(n.bit_length()) if 2 ** i <= n} | {n})
    metrics = sampled_metrics(groups, ks, seed)
    return [{"k": k, "maj": metrics[f"maj@{k}"], "pass": metrics[f"pass@{k}"]} for k in ks]

