"""The distillation teacher (`distill.*`): a frozen model that scores the student's own samples.

`load_teacher` loads `distill.teacher` through the same loader and resolver as `model.path`
(`builtin:...`, a local checkpoint folder, a hub id where there is network), on `distill.device`
("" = the run's device), and refuses a teacher whose tokenizer differs from the student's (exit 2):
the teacher scores the student's token ids, so both must mean the same text by the same id.

The behaviour-policy contract (docs/design/behaviour_policy.md): the teacher's log-prob of a token
is log softmax(z_teacher / T)[y] with T = `rollout.temperature`, the same temperature the trainer's
π_old and the engine's behaviour log-probs are taken at, and untruncated (top-k / top-p, which only
the engine's behaviour log-probs see, do not apply), exactly as the trainer's π_old is. So the
per-token reverse-KL sample log π_old − log π_T compares two distributions at the same T, and is 0
when teacher = student.

Guaranteed: one no-grad pass per update over the update's rows (cached for all its minibatches and
μ passes: the completions do not change within a step), split into micro-batches of at most
`micro_batch_tokens` padded tokens (0: one pass). Not guaranteed: that ids beyond the teacher's
embedding table are scored (the vocabularies are equal, so the engine never samples one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rlvr.errors import UserError
from rlvr.models.batch import Batch
from rlvr.models.device import Device
from rlvr.training import forward
from rlvr.training.plan import split_rows
from rlvr.training.update import Compute


def same_vocabulary(student, teacher) -> str | None:
    """None when both tokenizers map the same strings to the same ids with the same special tokens;
    else what differs, in words."""
    s_vocab, t_vocab = student.get_vocab(), teacher.get_vocab()
    if s_vocab != t_vocab:
        only_s = sorted(set(s_vocab.items()) - set(t_vocab.items()))[:3]
        only_t = sorted(set(t_vocab.items()) - set(s_vocab.items()))[:3]
        return (f"vocabularies differ ({len(s_vocab)} vs {len(t_vocab)} entries; student-only "
                f"{only_s}, teacher-only {only_t})")
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        if getattr(student, name, None) != getattr(teacher, name, None):
            return f"{name} differs ({getattr(student, name, None)} vs {getattr(teacher, name, None)})"
    return None


@dataclass
class Teacher:
    """A frozen model on its own device that returns log-probs of given completions."""

    model: Any
    device: Device

    def __post_init__(self) -> None:
        self.model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self._forward = forward.choose(self.model, Compute(self.device), self.device.bf16)

    @torch.no_grad()
    def logprobs(self, batch: Batch, temperature: float, micro_batch_tokens: int = 0) -> torch.Tensor:
        """[B, Tc] log softmax(z_teacher / temperature) of `batch`'s completion ids, on the batch's
        device; micro-batched by rows so each forward holds at most `micro_batch_tokens` padded
        tokens (the update's budget; 0: one forward)."""
        home = batch.completion_ids.device
        width = batch.prompt_ids.shape[1] + batch.completion_ids.shape[1]
        out = []
        for rows in split_rows(len(batch), width, micro_batch_tokens):
            part = (batch if rows is None else batch.rows(rows)).to(self.device)
            out.append(self._forward(part, temperature)[0].float().to(home))
        return torch.cat(out)


def load_teacher(cfg, student_tokenizer, run_device: Device) -> Teacher | None:
    """The teacher of `cfg.distill` (None when distill.teacher is empty), checked against the
    student's tokenizer; a mismatch is refused by name (UserError, exit 2)."""
    d = cfg.distill
    if not d.teacher:
        return None
    from rlvr.models.policy import load_policy

    device = run_device if not d.device else Device.resolve(d.device, run_device.bf16)
    try:
        model, tokenizer = load_policy(d.teacher, cfg.model.dtype, cfg.seed, device)
    except UserError as exc:
        raise UserError(f"distill.teacher: {exc}") from None
    differs = same_vocabulary(student_tokenizer, tokenizer)
    if differs:
        raise UserError(f"distill.teacher {d.teacher!r}: its tokenizer is not the student's "
                        f"({cfg.model.path!r}): {differs}; on-policy distillation needs the same vocabulary")
    return Teacher(model, device)
