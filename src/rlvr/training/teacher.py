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

`distill.vllm: true` (or `distill.vllm_url`) puts the teacher in a vLLM server process
(`rollout.vllm.server`, its "score" request: the prompt log-probs of given ids), so a large
teacher lives on a GPU of its own: started here from `distill.teacher` (the last visible GPU; on a
CPU, a process of its own), or the running server at `distill.vllm_url`. Its log-probs are vLLM's
temperature-1 prompt log-probs, so it needs rollout.temperature 1 (checked when the config
loads). Under torchrun each rank scores only its share of the update's rows (rows rank, rank +
world, ...) and the ranks exchange them (`training.update.score_rows`), with either kind of teacher.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rlvr.errors import ConfigError, UserError
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


def sequences(batch: Batch) -> tuple[list[list[int]], list[int]]:
    """Each row's prompt + completion ids without padding, and where its completion starts."""
    seqs, starts = [], []
    for p_ids, p_mask, c_ids, c_mask in zip(batch.prompt_ids.tolist(), batch.prompt_mask.tolist(),
                                            batch.completion_ids.tolist(), batch.completion_mask.tolist()):
        prompt = [t for t, m in zip(p_ids, p_mask) if m]
        seqs.append(prompt + [t for t, m in zip(c_ids, c_mask) if m])
        starts.append(len(prompt))
    return seqs, starts


class ServerTeacher:
    """The teacher in a vLLM server process: one "score" request per call, on a connection of its
    own (a server serves one client at a time, so ranks sharing it must hang up between calls),
    answered with the temperature-1 log-probs of each row's completion ids (0 on padding)."""

    def __init__(self, server, launcher=None, workdir: str = ""):
        self.server, self.launcher, self.workdir = server, launcher, workdir

    def logprobs(self, batch: Batch, temperature: float, micro_batch_tokens: int = 0) -> torch.Tensor:
        if temperature != 1.0:   # the config check refuses it first; a direct caller gets this
            raise ValueError(f"a vLLM server teacher scores at temperature 1, not {temperature}")
        seqs, starts = sequences(batch)
        try:
            reply = self.server.ask({"op": "score", "seqs": seqs, "starts": starts})
        finally:   # a server serves one connection at a time: torchrun's ranks take turns
            self.server.close()
        out = torch.zeros(batch.completion_ids.shape, dtype=torch.float32)
        for i, row in enumerate(reply["logprobs"]):
            out[i, :len(row)] = torch.tensor(row, dtype=torch.float32)
        return out.to(batch.completion_ids.device)

    def close(self) -> None:
        import shutil

        if self.launcher is not None:
            try:
                self.server.ask({"op": "stop"})
            except (OSError, EOFError, RuntimeError, ValueError):
                pass        # gone already: stop() below waits for it or kills it
            self.server.close()
            self.launcher.stop(self.server.handle)
        else:
            self.server.close()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def load_teacher(cfg, student_tokenizer, run_device: Device) -> Teacher | ServerTeacher | None:
    """The teacher of `cfg.distill` (None when distill.teacher is empty), checked against the
    student's tokenizer; a mismatch is refused by name (UserError, exit 2)."""
    d = cfg.distill
    if not d.enabled:
        return None
    if d.on_server:
        return _server_teacher(cfg, student_tokenizer)
    from rlvr.models.policy import load_policy

    device = run_device if not d.device else Device.resolve(d.device, run_device.bf16)
    try:
        model, tokenizer = load_policy(d.teacher, cfg.model.dtype, cfg.seed, device)
    except UserError as exc:
        raise UserError(f"distill.teacher: {exc}") from None
    _check_vocabulary(cfg, student_tokenizer, tokenizer)
    return Teacher(model, device)


def _check_vocabulary(cfg, student_tokenizer, teacher_tokenizer) -> None:
    differs = same_vocabulary(student_tokenizer, teacher_tokenizer)
    if differs:
        raise UserError(f"distill.teacher {cfg.distill.teacher or cfg.distill.vllm_url!r}: its tokenizer is "
                        f"not the student's ({cfg.model.path!r}): {differs}; on-policy distillation needs "
                        "the same vocabulary")


def _server_teacher(cfg, student_tokenizer) -> ServerTeacher:
    """A teacher server: the one at distill.vllm_url, else one started from distill.teacher."""
    import os
    import secrets
    import tempfile

    from rlvr.rollout.vllm.launch import LocalLauncher, server_python
    from rlvr.rollout.vllm.servers import Server, _by_url

    d = cfg.distill
    if d.vllm_url:
        (server,) = _by_url([d.vllm_url], "distill.vllm_url")
        try:
            reply = server.ask({"op": "tokenizer"})
        except (OSError, EOFError) as exc:
            raise UserError(f"distill.vllm_url {d.vllm_url}: no teacher server answers there "
                            f"({exc})") from None
        _check_vocabulary(cfg, student_tokenizer, _Vocabulary(reply))
        return ServerTeacher(server)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ConfigError("distill.vllm under torchrun: start one teacher server "
                          "(python -m rlvr.rollout.vllm.server --model TEACHER) and give distill.vllm_url, "
                          "so the ranks share it rather than each starting its own")
    workdir = tempfile.mkdtemp(prefix="rlvr-teacher-")
    try:
        model_dir, tokenizer = _teacher_dir(d.teacher, workdir)
        _check_vocabulary(cfg, student_tokenizer, tokenizer)
        key = secrets.token_hex(16)
        python = server_python(d.vllm_python, "distill.vllm_python")
        launcher = LocalLauncher(python, key, gpus=_teacher_gpu())
        # the trainer's precision: bf16 on a GPU (its autocast), else model.dtype
        options = {"dtype": "bfloat16" if launcher.gpus else cfg.model.dtype, **d.vllm_options}
        handle = launcher.spawn(model_dir, options)
        server = Server(launcher.key, launcher.ready(handle), handle, launcher)
    except BaseException:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return ServerTeacher(server, launcher, workdir)


class _Vocabulary:
    """A server's tokenizer as its "tokenizer" reply gives it (what `same_vocabulary` compares)."""

    def __init__(self, reply: dict):
        self.vocab: dict = reply["vocab"]
        self.bos_token_id = reply.get("bos_token_id")
        self.eos_token_id = reply.get("eos_token_id")
        self.unk_token_id = reply.get("unk_token_id")
        pad = reply.get("pad_token_id")
        self.pad_token_id = self.eos_token_id if pad is None else pad   # as `load_policy` does

    def get_vocab(self) -> dict:
        return self.vocab


def _teacher_dir(name: str, workdir: str):
    """(a checkpoint directory a server can load, its tokenizer): the resolved directory itself,
    or an in-memory builtin written once under `workdir`."""
    from rlvr.models.policy import load_policy
    from rlvr.models.resolve import IN_MEMORY, resolve_model_path

    try:
        path = resolve_model_path(name)
        if path in IN_MEMORY:
            model, tokenizer = load_policy(path)
            path = f"{workdir}/teacher"
            model.save_pretrained(path)
            tokenizer.save_pretrained(path)
            return path, tokenizer
        from transformers import AutoTokenizer

        return path, AutoTokenizer.from_pretrained(path)
    except (UserError, OSError) as exc:
        raise UserError(f"distill.teacher: {exc}") from None


def _teacher_gpu() -> list[str] | None:
    """The started teacher server's GPU: the last visible one (the trainer's ranks and the rollout
    servers take theirs from the front); None on a machine without CUDA (the server runs on the
    CPU). One visible GPU is the trainer's: refused."""
    from rlvr.rollout.vllm.launch import visible_gpus

    visible = visible_gpus()
    if not visible:
        return None
    if len(visible) == 1:
        raise ConfigError(f"distill.vllm: the teacher server needs a GPU of its own, but only GPU "
                          f"{visible[0]} is visible (the trainer's); keep the teacher in this process or "
                          "give distill.vllm_url")
    return [visible[-1]]
