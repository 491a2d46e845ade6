"""Shared fixtures: a small torch thread count, and tiny models built locally (no hub access)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_configure(config):
    import torch

    torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except Exception:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _deterministic_mode_reset():
    """A run with `run.deterministic: true` turns on torch's deterministic algorithms for the
    whole process (`Device.resolve`); later tests (the GPU graph tests) must get the kernels
    production uses, so each test leaves the setting as it found it."""
    import torch

    before = (torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled(), torch.backends.cudnn.benchmark)
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    torch.backends.cudnn.benchmark = before[2]


@pytest.fixture(scope="session")
def cold_start_model(tmp_path_factory):
    """The built-in tiny Llama after SFT on 3-digit addition, stopped once a held-out probe passes
    20 %: partial accuracy, so GRPO has signal and room to improve."""
    path = tmp_path_factory.mktemp("cold") / "sft"
    return make_cold_start(path, digits=3, stop_accuracy=0.2)


def make_cold_start(path, digits: int = 2, steps: int = 400, seed: int = 0, batch_size: int = 64,
                    ops: str = "+", stop_accuracy: float = 0.15, eval_every: int = 10):
    """Random tiny Llama + SFT on reasoner traces until a 100-problem held-out probe reaches
    `stop_accuracy` (checked every `eval_every` steps) or `steps` run out; saved as a HF checkpoint."""
    from rlvr.models.policy import load_policy
    from rlvr.tasks.arithmetic import ArithmeticTask
    from rlvr.training.sft import SFTConfig, sft, task_pairs, task_probe

    model, tokenizer = load_policy("builtin:tiny-llama", seed=seed)
    task = ArithmeticTask(digits, ops)
    evaluate = task_probe(model, tokenizer, task, n=100, max_new_tokens=10 * digits + 8)
    cfg = SFTConfig(steps=steps, batch_size=batch_size, warmup_steps=min(50, steps // 3), seed=seed,
                    eval_every=eval_every, stop_accuracy=stop_accuracy)
    sft(model, tokenizer, task_pairs(task, tokenizer, batch_size, seed), cfg,
        evaluate=evaluate if stop_accuracy else None)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture
def episode_grads():
    """Two ways to get the gradient of an update on episode groups (agent tests): through the
    library's `update_policy` (SGD with lr 1, so the weight change is the gradient), and through a
    plain HF forward of each full sequence with a chosen token mask, for comparison."""
    import copy
    from types import SimpleNamespace

    import torch

    from rlvr.training.update import UpdateSpec, update_policy

    def by_update(model, batch):
        m = copy.deepcopy(model)
        opt = torch.optim.SGD(m.parameters(), lr=1.0)
        before = [p.detach().clone() for p in m.parameters()]
        update_policy(m, opt, batch, UpdateSpec(grad_clip=0.0, skip_zero_advantage=False))
        return [b - p.detach() for b, p in zip(before, m.parameters())]

    def reference(model, groups, adv, mask_of):
        """Gradient of -Σ_i A_i Σ_t∈mask logp_t / Σ mask via a plain HF forward of each sequence."""
        m = copy.deepcopy(model)
        m.zero_grad()
        rows = [(g.prompt_ids, c, float(adv[p, j])) for p, g in enumerate(groups)
                for j, c in enumerate(g.completions)]
        total = sum(sum(mask_of(c)) for _, c, _ in rows)
        for prompt, c, a in rows:
            ids = torch.tensor([prompt + c.token_ids])
            logits = m(input_ids=ids).logits[0, len(prompt) - 1:-1].float()          # [T, V]
            logp = torch.log_softmax(logits, -1).gather(-1, ids[0, len(prompt):, None]).squeeze(-1)
            (-(a * (logp * torch.tensor(mask_of(c), dtype=torch.float32)).sum()) / total).backward()
        return [p.grad if p.grad is not None else torch.zeros_like(p) for p in m.parameters()]

    return SimpleNamespace(by_update=by_update, reference=reference)
