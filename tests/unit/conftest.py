"""Fixtures the unit tests share."""

import pytest
import torch.distributed as dist


@pytest.fixture
def one_rank_group(tmp_path):
    """A real gloo process group of one rank (DDP and FSDP2 need one), torn down after the test."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
