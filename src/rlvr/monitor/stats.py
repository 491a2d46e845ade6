"""Per-step metrics computed from scored groups (names follow TRL / verl where one exists).

Also the metrics of agent episodes (`episode_metrics`: turns, finish reasons, tamper rate), here
rather than in `rlvr.agents` so that monitoring depends on nothing above it."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from rlvr.types import Group

# how an agent episode ends (`rlvr.agents.episode`): the model answered, or a budget or the env ended it
FINISH_REASONS = ("stop", "turns", "tokens", "env")


def step_metrics(groups: Sequence[Group], advantages_P_G: torch.Tensor, max_new_tokens: int,
                 std_tol: float = 1e-6) -> dict[str, Any]:
    rewards = torch.tensor([g.rewards for g in groups], dtype=torch.float64)  # [P, G]
    comps = [c for g in groups for c in g.completions]
    lengths = torch.tensor([len(c.token_ids) for c in comps], dtype=torch.float64)
    correct = [bool(c.score and c.score.correct) for c in comps]
    flags: dict[str, int] = {}
    for c in comps:
        for f in (c.score.flags if c.score else ()):
            flags[f] = flags.get(f, 0) + 1
    out: dict[str, Any] = {
        "reward/mean": float(rewards.mean()),
        "reward/std": float(rewards.std(unbiased=False)),
        "accuracy": sum(correct) / max(1, len(correct)),
        "frac_reward_zero_std": float((rewards.std(dim=1, unbiased=False) <= std_tol).double().mean()),
        "completions/mean_length": float(lengths.mean()),
        "completions/max_length": float(lengths.max()),
        "completions/min_length": float(lengths.min()),
        # an agent episode that ran out of tokens ("tokens") is cut off like a "length" completion
        "completions/clipped_ratio": sum(c.finish_reason in ("length", "tokens") for c in comps) / len(comps),
        "completions/total_tokens": float(lengths.sum()),
        "advantages/abs_mean": float(advantages_P_G.abs().mean()),
        "group_pass_rates": [round(sum(bool(c.score and c.score.correct) for c in g.completions)
                                   / len(g.completions), 4)
                             for g in groups],
    }
    for name, count in sorted(flags.items()):
        out[f"flags/{name}"] = count / len(comps)
    if any(c.loss_mask is not None for c in comps):      # agent episodes: turns and finish reasons
        out.update({k: v for k, v in episode_metrics(groups).items() if k.startswith("episodes/")})
    out.update(per_verifier_metrics(groups, std_tol))
    return out


def per_verifier_metrics(groups: Sequence[Group], std_tol: float = 1e-6) -> dict[str, float]:
    """`reward/<verifier>/{mean, accuracy, share, frac_zero_std}` for each verifier in the batch
    (share: its fraction of the batch's completions), and TRL's `rewards/<term>/mean` for each term
    of a combined verifier (the mean over completions where the term applied, i.e. was not None)."""
    by_name: dict[str, list[Group]] = {}
    for g in groups:
        by_name.setdefault(g.problem.verifier, []).append(g)
    total = sum(len(g.completions) for g in groups)
    out: dict[str, float] = {}
    for name, gs in sorted(by_name.items()):
        rewards = [r for g in gs for r in g.rewards]
        correct = [bool(c.score and c.score.correct) for g in gs for c in g.completions]
        out[f"reward/{name}/mean"] = sum(rewards) / len(rewards)
        out[f"reward/{name}/accuracy"] = sum(correct) / len(correct)
        out[f"reward/{name}/share"] = len(rewards) / total
        out[f"reward/{name}/frac_zero_std"] = sum(
            float(torch.tensor(g.rewards, dtype=torch.float64).std(unbiased=False)) <= std_tol
            for g in gs) / len(gs)
    terms: dict[str, list[float]] = {}
    for g in groups:
        for c in g.completions:
            for term, value in ((c.score.details or {}).get("terms") or {}).items() if c.score else ():
                if value is not None:
                    terms.setdefault(term, []).append(float(value))
    for term, values in sorted(terms.items()):
        out[f"rewards/{term}/mean"] = sum(values) / len(values)
    out.update(judged_metrics(groups, terms))
    return out


def judged_metrics(groups: Sequence[Group], terms: dict[str, list[float]]) -> dict[str, float]:
    """`rewards/judged/mean` and `rewards/rule_based/mean`: the mean over model-judged terms (a
    judge, a reward model: `details["model_terms"]`) and over the other terms, each term's mean
    counted once; absent without a model term (the doctor's judge_rise alarm reads them)."""
    judged = {t for g in groups for c in g.completions if c.score
              for t in (c.score.details or {}).get("model_terms", ())}
    if not judged or not set(terms) - judged:
        return {}
    means = {t: sum(v) / len(v) for t, v in terms.items()}
    rules = [m for t, m in means.items() if t not in judged]
    models = [m for t, m in means.items() if t in judged]
    return {"rewards/judged/mean": sum(models) / len(models),
            "rewards/rule_based/mean": sum(rules) / len(rules)}


def episode_metrics(groups: Sequence[Group]) -> dict[str, float]:
    """episodes/turns_mean, episodes/finish_<reason> shares, behaviour/tamper_rate."""
    done = [c for g in groups for c in g.completions]
    n = max(1, len(done))
    out = {"episodes/turns_mean": sum(c.turns for c in done) / n}
    for reason in FINISH_REASONS:
        out[f"episodes/finish_{reason}"] = sum(c.finish_reason == reason for c in done) / n
    out["behaviour/tamper_rate"] = sum(
        bool(c.score and "tamper_attempt" in c.score.flags) for c in done) / n
    return out
