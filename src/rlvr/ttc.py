"""Test-time compute: pass@k / maj@k during training, temperature sweeps and budget forcing.

Budget forcing follows s1 (Muennighoff et al., arXiv:2501.19393), "forcing a maximum": the model
thinks greedily; a completion still running after `budget` tokens is cut there, the task's answer
marker (">" for the built-in task, e.g. "\\n\\boxed{" for math) is appended, and the model must
answer greedily within `answer_tokens` more tokens. A completion that ends on its own within the
budget is scored as it is. Deviations from s1: we do not also force a minimum ("Wait"), and the
thinking is generated once at the largest budget and truncated for the smaller ones, which is
exactly what separate greedy runs would give (greedy decoding of a prefix does not depend on the
length limit).

Guaranteed: every function is deterministic given `seed` and the weights; `mean_tokens` counts
every generated token (thinking + marker + forced answer). Not guaranteed: that the continuation
method exists on engines other than `HFEngine` (budget forcing needs to decode from token ids).
"""

from __future__ import annotations

from typing import Sequence

from rlvr.errors import UserError
from rlvr.evaluate import sampled_metrics, score_groups
from rlvr.rollout.base import SamplingParams
from rlvr.types import Completion, Group, Problem


def sample_groups(engine, problems: Sequence[Problem], verifiers: dict, n: int,
                  temperature: float, max_new_tokens: int, seed: int) -> list[Group]:
    """n scored samples per problem at `temperature` (top-p off)."""
    params = SamplingParams(temperature=temperature, top_p=1.0, max_new_tokens=max_new_tokens)
    groups = engine.generate(list(problems), n, params, seed)
    score_groups(groups, verifiers)
    return groups


def ttc_metrics(engine, problems: Sequence[Problem], verifiers: dict, ks: Sequence[int],
                max_new_tokens: int, seed: int, temperature: float = 1.0) -> dict[str, float]:
    """Flat "eval/pass@k", "eval/maj@k", "eval/mean@k" for each k, from max(ks) samples per
    problem. Meant for periodic evaluation inside the training loop (config `eval.k`)."""
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be positive integers, got {list(ks)}")
    groups = sample_groups(engine, problems, verifiers, max(ks), temperature, max_new_tokens, seed)
    return {f"eval/{key}": value for key, value in sampled_metrics(groups, ks, seed).items()}


def temperature_sweep(sample, temperatures: Sequence[float], ks: Sequence[int],
                      seed: int = 0) -> list[dict[str, float]]:
    """One row {temperature, pass@k, maj@k, mean@k ...} per temperature.

    `sample(temperature) -> scored groups` lets the caller reuse samples it already drew.
    """
    return [{"temperature": t, **sampled_metrics(sample(t), ks, seed)} for t in temperatures]


def marker_ids(tokenizer, marker: str) -> list[int]:
    """Token ids of the answer marker; a marker the tokenizer cannot represent is a user error."""
    ids = list(tokenizer(marker, add_special_tokens=False)["input_ids"])
    unk = getattr(tokenizer, "unk_token_id", None)
    if not ids or (unk is not None and unk in ids):
        raise UserError(f"answer marker {marker!r} cannot be written with this model's tokenizer "
                        f"(it encodes to {ids}); pass --answer-marker with text the model knows")
    return ids


def _forced_prompts(groups: Sequence[Group], budget: int, marker: list[int]):
    """Per completion: None when it ended on its own within `budget`, else the ids to continue."""
    out = []
    for g in groups:
        c = g.completions[0]
        ended = c.finish_reason == "stop" and len(c.token_ids) <= budget
        out.append(None if ended else list(g.prompt_ids) + c.token_ids[:budget] + marker)
    return out


def _continue(engine, prompts: list[list[int]], answer_tokens: int, seed: int) -> list[list[int]]:
    """Greedy continuations of raw token-id prompts, end-of-sequence token dropped."""
    import torch

    if not hasattr(engine, "_decode"):
        raise UserError(f"budget forcing needs an engine that decodes from token ids; "
                        f"{type(engine).__name__} cannot (use the hf engine)")
    params = SamplingParams(max_new_tokens=answer_tokens, greedy=True)
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for start in range(0, len(prompts), engine.max_batch):
        rows.extend(engine._decode(prompts[start:start + engine.max_batch], params, gen))
    return [tokens[:-1] if reason == "stop" else tokens for tokens, _, reason in rows]


def force_answers(engine, groups: Sequence[Group], budget: int, marker: list[int],
                  answer_tokens: int, seed: int = 0) -> list[Group]:
    """New single-completion groups: each thinking cut at `budget` tokens, then made to answer."""
    prompts = _forced_prompts(groups, budget, marker)
    todo = [p for p in prompts if p is not None]
    answers = iter(_continue(engine, todo, answer_tokens, seed) if todo else [])
    out = []
    for g, prompt in zip(groups, prompts):
        c = g.completions[0]
        if prompt is not None:
            ids = c.token_ids[:budget] + marker + next(answers)
            text = engine.tokenizer.decode(ids, skip_special_tokens=True)
            c = Completion(text, ids, [], "forced")
        out.append(Group(g.problem, g.prompt_ids, [c]))
    return out


def budget_curve(engine, problems: Sequence[Problem], verifiers: dict, budgets: Sequence[int],
                 marker: str, answer_tokens: int = 8, seed: int = 0) -> list[dict[str, float]]:
    """Accuracy vs thinking-token budget: [{budget, accuracy, mean_tokens, forced_fraction}]."""
    if not budgets or min(budgets) < 0:
        raise ValueError(f"budgets must be non-negative integers, got {list(budgets)}")
    marker_tok = marker_ids(engine.tokenizer, marker)
    params = SamplingParams(max_new_tokens=max(max(budgets), 1), greedy=True)
    thoughts = engine.generate(list(problems), 1, params, seed)
    curve = []
    for budget in sorted(set(budgets)):
        groups = force_answers(engine, thoughts, budget, marker_tok, answer_tokens, seed)
        score_groups(groups, verifiers)
        done = [g.completions[0] for g in groups]
        curve.append({"budget": budget,
                      "accuracy": sum(bool(c.score.correct) for c in done) / len(done),
                      "mean_tokens": sum(len(c.token_ids) for c in done) / len(done),
                      "forced_fraction": sum(c.finish_reason == "forced" for c in done) / len(done)})
    return curve
