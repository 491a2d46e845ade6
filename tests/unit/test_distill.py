"""On-policy distillation: the per-token reverse-KL advantage (`algo.losses.distill_advantage`),
the teacher component (`training.teacher`) and its place in the update."""

import copy
import dataclasses
import math

import pytest
import torch

from rlvr.algo.losses import LossSpec, grpo_loss
from rlvr.errors import UserError
from rlvr.models.batch import build_batch
from rlvr.models.device import Device
from rlvr.models.policy import BUILTIN_TINY, BUILTIN_TINY_ASCII, load_policy
from rlvr.models.tiny import build_model
from rlvr.training import forward
from rlvr.training.plan import split_rows
from rlvr.training.teacher import Teacher, load_teacher, same_vocabulary
from rlvr.training.update import Compute, UpdateSpec, update_policy
from rlvr.types import Completion, Group, Problem

torch.set_num_threads(1)

LOGP = [[-1.0, -2.0, -0.5]]
TEACHER = torch.tensor([[-1.5, -1.0, math.nan]])   # a nan on padding must not reach loss or gradient
MASK = torch.tensor([[1.0, 1.0, 0.0]])


def _loss(adv, spec, teacher=TEACHER):
    logp = torch.tensor(LOGP, requires_grad=True)
    loss, stats = grpo_loss(logp, logp.detach(), torch.tensor(adv), MASK, spec, teacher_logp=teacher)
    loss.backward()
    return loss, logp.grad, stats


def test_pure_distillation_loss_and_gradient_by_hand():
    # k1 = log π_s − log π_T = [0.5, −1.0]; A_t = −0.5·k1; token-mean of −A_t·ρ at ρ = 1 over 2 tokens
    loss, grad, stats = _loss([3.0], LossSpec(distill_coef=0.5, distill_only=True))
    assert loss.item() == pytest.approx(0.5 * (0.5 - 1.0) / 2)
    # d/dlogp of −A_t·exp(logp − old) = −A_t = 0.5·k1, over 2 tokens; padding 0
    assert grad[0].tolist() == pytest.approx([0.5 * 0.5 / 2, 0.5 * -1.0 / 2, 0.0])
    assert stats["distill/kl"].item() == pytest.approx(-0.25)
    assert stats["distill/teacher_logp"].item() == pytest.approx(-1.25)
    assert stats["distill/student_logp"].item() == pytest.approx(-1.5)


def test_distillation_adds_to_the_verifier_advantage_by_hand():
    # A_t = 1 − 0.5·k1 = [0.75, 1.5]: loss = −(0.75 + 1.5)/2, gradient −A_t/2
    loss, grad, _ = _loss([1.0], LossSpec(distill_coef=0.5))
    assert loss.item() == pytest.approx(-1.125)
    assert grad[0].tolist() == pytest.approx([-0.375, -0.75, 0.0])


def test_pure_distillation_is_zero_when_teacher_is_student():
    teacher = torch.tensor([[-1.0, -2.0, 7.0]])       # equal on every completion token
    loss, grad, stats = _loss([2.0], LossSpec(distill_coef=1.0, distill_only=True), teacher)
    assert loss.item() == 0.0 and grad.abs().max().item() == 0.0
    assert stats["distill/kl"].item() == 0.0


def test_distillation_makes_zero_advantage_rows_count():
    assert LossSpec().zero_advantage_inert
    assert not LossSpec(distill_coef=0.1).zero_advantage_inert


# --- the teacher component -------------------------------------------------------------------

def _groups():
    comps = [[7, 8, 2], [9, 2], [7, 7, 7, 2]]
    return [Group(Problem(id="p", prompt=""), [1, 5, 6],
                  [Completion("", c, [-1.0] * len(c), "stop") for c in comps])]


def _batch(adv=(1.0, -1.0, 0.0)):
    return build_batch(_groups(), torch.tensor([list(adv)]), pad_id=0)


@pytest.fixture(scope="module")
def tiny():
    model, _ = build_model(seed=1, hidden=32, layers=2, heads=4, mlp=64)
    return model


def test_teacher_logprobs_are_log_softmax_at_the_rollout_temperature(tiny):
    """The contract: log softmax(z_teacher / T)[y], untruncated, the same T as the trainer's π_old."""
    batch, temp = _batch(), 0.7
    got = Teacher(copy.deepcopy(tiny), Device.cpu()).logprobs(batch, temp)
    ids = torch.cat([batch.prompt_ids, batch.completion_ids], 1)
    mask = torch.cat([batch.prompt_mask, batch.completion_mask], 1)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = tiny(input_ids=ids, attention_mask=mask, position_ids=pos).logits.float()
    tp = batch.prompt_ids.shape[1]
    logsm = torch.log_softmax(logits[:, tp - 1:-1] / temp, -1)
    want = logsm.gather(-1, batch.completion_ids[..., None])[..., 0]
    keep = batch.completion_mask.bool()
    assert torch.allclose(got[keep], want[keep], atol=1e-4)
    # teacher = student: exactly the trainer's π_old at the same temperature, so k1 = 0
    old = forward.choose(tiny, Compute(), False)(batch, temp)[0].detach()
    assert torch.equal(got[keep], old[keep])


def test_teacher_micro_batches_give_the_one_pass_values(tiny):
    batch = _batch()
    assert [len(c) for c in split_rows(len(batch), 3 + 4, 2 * 7)] == [2, 1]   # 3 + 4 columns per row
    teacher = Teacher(copy.deepcopy(tiny), Device.cpu())
    one, parts = teacher.logprobs(batch, 1.0), teacher.logprobs(batch, 1.0, micro_batch_tokens=7)
    keep = batch.completion_mask.bool()
    assert torch.allclose(one[keep], parts[keep], atol=1e-5)


def test_a_teacher_with_another_vocabulary_is_refused_by_name():
    _, student_tok = load_policy(BUILTIN_TINY)
    _, same = load_policy(BUILTIN_TINY, seed=3)
    _, other = load_policy(BUILTIN_TINY_ASCII)
    assert same_vocabulary(student_tok, same) is None
    assert "vocabularies differ" in same_vocabulary(student_tok, other)
    cfg = _cfg(teacher=BUILTIN_TINY_ASCII)
    refused = "distill.teacher 'builtin:tiny-llama-ascii'.*not the student's"
    with pytest.raises(UserError, match=refused) as err:
        load_teacher(cfg, student_tok, Device.cpu())
    assert err.value.exit_code == 2


def _cfg(**distill):
    from rlvr.config import Config, DistillConfig
    return dataclasses.replace(Config(), distill=DistillConfig(**distill))


def _run(model, teacher, spec):
    model = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    before = [p.detach().clone() for p in model.parameters()]
    stats = update_policy(model, opt, _batch(), spec, teacher=teacher)
    moved = max((p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before))
    return stats, moved


def test_update_with_teacher_equal_to_student_does_not_move_a_pure_distillation_student(tiny):
    spec = UpdateSpec(LossSpec(distill_coef=1.0, distill_only=True))
    stats, moved = _run(tiny, Teacher(copy.deepcopy(tiny), Device.cpu()), spec)
    assert stats["distill/kl"] == 0.0 and moved == 0.0
    other, _ = build_model(seed=2, hidden=32, layers=2, heads=4, mlp=64)
    stats, moved = _run(tiny, Teacher(other, Device.cpu()), spec)
    assert stats["distill/kl"] != 0.0 and moved > 0.0
    assert stats["distill/teacher_logp"] < 0.0 and stats["distill/student_logp"] < 0.0


def test_a_vllm_teacher_needs_temperature_1_and_a_url_needs_the_engine():
    from rlvr import config as config_mod
    from rlvr.errors import ConfigError

    base = config_mod.PRESETS / "quickstart.yaml"
    ok = config_mod.load(base, ["distill.vllm_url=127.0.0.1:9"])
    assert ok.distill.enabled and ok.distill.on_server
    with pytest.raises(ConfigError, match="distill.vllm: a teacher on a vLLM server needs rollout.temperature=1"):
        config_mod.load(base, ["distill.vllm=true", "distill.teacher=x", "rollout.temperature=0.7"])
    with pytest.raises(ConfigError, match="distill.vllm_url: the teacher is the server there"):
        config_mod.load(base, ["distill.vllm_url=127.0.0.1:9", "distill.teacher=x"])
    with pytest.raises(ConfigError, match="distill.vllm: starts a server from distill.teacher, which is empty"):
        config_mod.load(base, ["distill.vllm=true"])


def test_sequences_drop_the_padding_and_mark_where_completions_start():
    from rlvr.models.batch import Batch
    from rlvr.training.teacher import sequences

    batch = Batch(torch.tensor([[0, 5, 6], [7, 8, 9]]), torch.tensor([[0, 1, 1], [1, 1, 1]]),
                  torch.tensor([[1, 2, 0], [3, 0, 0]]), torch.tensor([[1, 1, 0], [1, 0, 0]]),
                  torch.zeros(2), torch.zeros(2, 3))
    assert sequences(batch) == ([[5, 6, 1, 2], [7, 8, 9, 3]], [2, 3])


def test_a_started_teacher_server_takes_the_last_gpu_and_never_the_trainers(monkeypatch):
    from rlvr.errors import ConfigError
    from rlvr.rollout.vllm import launch
    from rlvr.training.teacher import _teacher_gpu

    for visible, expected in (([], None), (["0", "1", "2"], ["2"])):
        monkeypatch.setattr(launch, "visible_gpus", lambda v=visible: v)
        assert _teacher_gpu() == expected
    monkeypatch.setattr(launch, "visible_gpus", lambda: ["3"])
    with pytest.raises(ConfigError, match="only GPU 3 is visible"):
        _teacher_gpu()
