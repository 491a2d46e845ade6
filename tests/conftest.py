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


@pytest.fixture(scope="session")
def cold_start_model(tmp_path_factory):
    """The built-in tiny Llama after SFT on 3-digit addition, stopped once a held-out probe passes
    20 %: partial accuracy, so GRPO has signal and room to improve."""
    from rlvr.tasks.fixtures import make_cold_start

    path = tmp_path_factory.mktemp("cold") / "sft"
    return make_cold_start(path, digits=3, stop_accuracy=0.2)
