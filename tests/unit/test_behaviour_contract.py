"""The behaviour-policy contract (`rlvr.rollout.base`): what a behaviour log-prob means under
temperature, top-k and top-p, and the version and seed every group carries."""

import copy
import math

import pytest
import torch

from rlvr.models.policy import completion_logits, left_pad, right_pad, token_logprobs
from rlvr.models.tiny import build_model
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFEngine
from rlvr.rollout.sampling import invert_cdf, sample_next
from rlvr.tasks.arithmetic import make_problem

torch.set_num_threads(1)

# logits [2, 1, 0, -1]: softmax = [0.6439, 0.2369, 0.0871, 0.0321], cumulative [0.644, 0.881, 0.968, 1]
LOGITS = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(4000, 1)
E = math.e


def _draw(params: SamplingParams) -> dict[int, float]:
    """token -> recorded log-prob over many draws (the log-prob of a token must not vary)."""
    tokens, logps = sample_next(LOGITS, params, torch.Generator().manual_seed(0))
    out: dict[int, float] = {}
    for t, lp in zip(tokens.tolist(), logps.tolist()):
        assert out.setdefault(t, lp) == lp
    return out


@pytest.mark.parametrize("params, expected", [
    # no truncation: log softmax(z / T)
    (SamplingParams(), {0: 2 - math.log(E**2 + E + 1 + 1 / E), 3: -1 - math.log(E**2 + E + 1 + 1 / E)}),
    (SamplingParams(temperature=2.0), {0: 1 - math.log(E + E**0.5 + 1 + E**-0.5)}),
    # top-k = 2: renormalised over {0, 1}
    (SamplingParams(top_k=2), {0: 2 - math.log(E**2 + E), 1: 1 - math.log(E**2 + E)}),
    (SamplingParams(temperature=2.0, top_k=2), {0: 1 - math.log(E + E**0.5)}),
    # top-p = 0.9: the mass before token 2 is 0.881 <= 0.9, so {0, 1, 2} are kept
    (SamplingParams(top_p=0.9), {0: 2 - math.log(E**2 + E + 1), 2: -math.log(E**2 + E + 1)}),
    # top-k = 3 first, then top-p on the renormalised top-3 (mass before token 2: 0.910 > 0.9)
    (SamplingParams(top_k=3, top_p=0.9), {0: 2 - math.log(E**2 + E), 1: 1 - math.log(E**2 + E)}),
    # min-p = 0.3: tokens below 0.3 x 0.644 = 0.193 are cut, {0, 1} kept; 0.1: 0.064, {0, 1, 2}
    (SamplingParams(min_p=0.3), {0: 2 - math.log(E**2 + E), 1: 1 - math.log(E**2 + E)}),
    (SamplingParams(min_p=0.1), {2: -math.log(E**2 + E + 1)}),
    # after temperature 2 the top probability is 0.455: 0.3 x 0.455 = 0.137 keeps {0, 1, 2}
    (SamplingParams(temperature=2.0, min_p=0.3), {0: 1 - math.log(E + E**0.5 + 1)}),
    # min-p before top-k (vLLM's order)
    (SamplingParams(min_p=0.1, top_k=2), {0: 2 - math.log(E**2 + E)}),
])
def test_behaviour_logprob_is_under_the_truncated_renormalised_distribution(params, expected):
    seen = _draw(params)
    for token, logp in expected.items():
        assert seen[token] == pytest.approx(logp, abs=1e-5)
    if params.top_k or params.top_p < 1 or params.min_p:   # the kept tokens' probabilities sum to 1
        assert math.log(sum(math.exp(v) for v in seen.values())) == pytest.approx(0.0, abs=1e-5)


def test_truncation_never_samples_outside_the_kept_set():
    assert set(_draw(SamplingParams(top_k=3, top_p=0.9))) == {0, 1}
    assert set(_draw(SamplingParams(top_p=0.9))) == {0, 1, 2}
    assert set(_draw(SamplingParams(temperature=3.0))) == {0, 1, 2, 3}


def test_draws_follow_the_distribution_they_record():
    """Token frequencies over 4000 draws match softmax([2, 1, 0, -1]) within 4 standard errors."""
    tokens, _ = sample_next(LOGITS, SamplingParams(), torch.Generator().manual_seed(0))
    p = LOGITS[0].softmax(-1)
    counts = torch.bincount(tokens, minlength=4).float()
    se = (len(tokens) * p * (1 - p)).sqrt()
    assert ((counts - len(tokens) * p).abs() <= 4 * se).all(), counts


def test_inverse_cdf_never_lands_on_a_zero_weight_entry_at_either_end_of_u():
    cdf = torch.tensor([[0.0, 0.5, 0.5, 1.0, 1.0]])   # weights [0, 0.5, 0, 0.5, 0]
    below_one = torch.tensor([[1.0]]).nextafter(torch.zeros(1, 1))
    assert invert_cdf(cdf, torch.zeros(1, 1)).item() == 1
    assert invert_cdf(cdf, torch.full((1, 1), 0.5)).item() == 3
    assert invert_cdf(cdf, below_one).item() == 3
    assert invert_cdf(cdf * 3, below_one).item() == 3


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = build_model(seed=3, hidden=32, layers=2, heads=4, mlp=64)
    model.eval()
    return model, tokenizer


PROBLEMS = [make_problem(12, 345, "+"), make_problem(7, 8, "+")]


def _full_logp(model, tokenizer, group, temperature):
    comps = group.completions
    prompt_ids, prompt_mask = left_pad([group.prompt_ids] * len(comps), tokenizer.pad_token_id)
    comp_ids, comp_mask = right_pad([c.token_ids for c in comps], tokenizer.pad_token_id)
    with torch.no_grad():
        logits = completion_logits(model, prompt_ids, prompt_mask, comp_ids, comp_mask)
    return token_logprobs(logits, comp_ids, temperature=temperature), comp_mask.bool()


@pytest.mark.parametrize("params", [SamplingParams(temperature=1.5, top_p=0.6, max_new_tokens=8),
                                    SamplingParams(temperature=1.0, min_p=0.55, max_new_tokens=8)],
                         ids=["top_p", "min_p"])
def test_engine_records_truncated_logprobs_above_the_full_distribution(tiny, params):
    """Under top-p or min-p the recorded log μ exceeds the trainer's log π (full softmax(z / T))
    by −log of the kept mass: >= 0 everywhere, > 0 where the truncation dropped tokens."""
    model, tokenizer = tiny
    groups = HFEngine(model, tokenizer).generate(PROBLEMS, 6, params, seed=4)
    gaps = []
    for group in groups:
        full, mask = _full_logp(model, tokenizer, group, params.temperature)
        for i, c in enumerate(group.completions):
            gaps.append(torch.tensor(c.logprobs) - full[i][mask[i]])
    gap = torch.cat(gaps)
    assert gap.min() > -1e-4 and gap.max() > 0.1


def test_groups_carry_version_and_seed_and_a_copy_engine_syncs(tiny):
    model, tokenizer = tiny
    shared = HFEngine(model, tokenizer)
    shared.load_weights(model, 7)
    params = SamplingParams(temperature=2.0, max_new_tokens=6)
    groups = shared.generate(PROBLEMS, 3, params, seed=11)
    assert [(g.policy_version, g.seed) for g in groups] == [(7, 11), (7, 11)]
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.parameters():
            p.mul_(3.0)
    copied = HFEngine(other, tokenizer)
    tokens = lambda gs: [(c.token_ids, c.logprobs) for g in gs for c in g.completions]  # noqa: E731
    assert tokens(copied.generate(PROBLEMS, 3, params, seed=11)) != tokens(groups)
    copied.load_weights(model, 8)
    again = copied.generate(PROBLEMS, 3, params, seed=11)
    assert tokens(again) == tokens(groups) and again[0].policy_version == 8
    assert other is copied.model and next(other.parameters()) is not next(model.parameters())
