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
every generated token (thinking + marker + forced answer, EOS included). Not guaranteed: budget
forcing on engines without an in-process Hugging Face `model` (forced answers decode from token ids
with that model); the thinking itself comes from the engine's own `generate`.
"""

from __future__ import annotations

from typing import Callable, Sequence

from rlvr.errors import UserError
from rlvr.evaluation.metrics import sampled_metrics, score_groups
from rlvr.rollout.base import SamplingParams
from rlvr.types import Completion, Group, Problem

# (token-id prompts, max new tokens) -> greedy answer ids per prompt, without the EOS token
Continue = Callable[[list[list[int]], int], list[list[int]]]


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


def greedy_continuations(engine, prompts: list[list[int]], max_new_tokens: int,
                         batch: int = 64) -> list[list[int]]:
    """Greedy continuations of raw token-id prompts (end-of-sequence token dropped), decoded with
    the engine's model and its KV cache. Written here rather than in the engine because only
    budget forcing needs to resume from token ids; it needs `engine.model` and `engine.tokenizer`.
    """
    import torch

    model, tok = engine.model, engine.tokenizer
    eos = {tok.eos_token_id} | set(_as_list(model.generation_config.eos_token_id))
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            return [ids for start in range(0, len(prompts), batch)
                    for ids in _greedy(model, prompts[start:start + batch], max_new_tokens, pad, eos,
                                       getattr(engine, "device", None))]
    finally:
        model.train(was_training)


def _greedy(model, prompts: list[list[int]], max_new: int, pad: int, eos: set,
            device=None) -> list[list[int]]:
    import inspect

    import torch

    from rlvr.models.device import Device
    from rlvr.models.policy import left_pad, positions

    device = device or Device.cpu()

    # transformers 5.x renamed `past_key_values` to `cache`; older releases know only the former.
    cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    ids, mask = (device.to(x) for x in left_pad(prompts, pad))           # [B, T]
    pos = positions(mask)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
    eos_t = device.to(torch.tensor(sorted(e for e in eos if e is not None), dtype=torch.long))
    tokens, done = [], device.to(torch.zeros(len(prompts), dtype=torch.bool))
    for t in range(max_new):
        nxt = out.logits[:, -1].argmax(-1)                               # [B]
        tokens.append(torch.where(done, torch.full_like(nxt, pad), nxt))
        done |= torch.isin(nxt, eos_t)
        if bool(done.all()) or t + 1 == max_new:
            break
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        out = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=pos[:, -1:] + 1 + t,
                    use_cache=True, **{cache_kw: out.past_key_values})
    rows = torch.stack(tokens, dim=1).tolist() if tokens else [[] for _ in prompts]
    return [_until_eos(row, eos) for row in rows]


def _until_eos(row: list[int], eos: set) -> list[int]:
    for i, token in enumerate(row):
        if token in eos:
            return row[:i]
    return row


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def force_answers(tokenizer, groups: Sequence[Group], budget: int, marker: list[int],
                  answer_tokens: int, cont: Continue) -> list[Group]:
    """New single-completion groups: each thinking cut at `budget` tokens, then made to answer.

    `cont(prompts, max_new_tokens)` returns the greedy answer ids for each token-id prompt. A
    forced completion has finish_reason "forced" and no log-probs (it is never trained on)."""
    prompts = _forced_prompts(groups, budget, marker)
    todo = [p for p in prompts if p is not None]
    answers = iter(cont(todo, answer_tokens) if todo else [])
    out = []
    for g, prompt in zip(groups, prompts):
        c = g.completions[0]
        if prompt is not None:
            ids = c.token_ids[:budget] + marker + next(answers)
            text = tokenizer.decode(ids, skip_special_tokens=True)
            c = Completion(text, ids, [], "forced")
        out.append(Group(g.problem, g.prompt_ids, [c]))
    return out


def budget_curve(engine, problems: Sequence[Problem], verifiers: dict, budgets: Sequence[int],
                 marker: str, answer_tokens: int = 8, seed: int = 0,
                 cont: Continue | None = None) -> list[dict[str, float]]:
    """Accuracy vs thinking-token budget: [{budget, accuracy, mean_tokens, forced_fraction}].

    `cont` continues token-id prompts greedily (default: `greedy_continuations` on the engine)."""
    cont = cont or (lambda prompts, max_new: greedy_continuations(engine, prompts, max_new))
    if not budgets or min(budgets) < 0:
        raise ValueError(f"budgets must be non-negative integers, got {list(budgets)}")
    marker_tok = marker_ids(engine.tokenizer, marker)
    params = SamplingParams(max_new_tokens=max(max(budgets), 1), greedy=True)
    thoughts = engine.generate(list(problems), 1, params, seed)
    curve = []
    for budget in sorted(set(budgets)):
        groups = force_answers(engine.tokenizer, thoughts, budget, marker_tok, answer_tokens, cont)
        score_groups(groups, verifiers)
        done = [g.completions[0] for g in groups]
        curve.append({"budget": budget,
                      "accuracy": sum(bool(c.score and c.score.correct) for c in done) / len(done),
                      "mean_tokens": sum(len(c.token_ids) for c in done) / len(done),
                      "forced_fraction": sum(c.finish_reason == "forced" for c in done) / len(done)})
    return curve
