"""Under torchrun with FSDP2: after an optimizer step and `load_weights`, every rank's sampling
copy (`FullCopyEngine`) holds the updated policy. Usage: torchrun ... copy_worker.py OUT; each
rank writes OUT.rank<r> (JSON) with the largest difference to the policy and the step's size."""

import copy
import json
import sys

import torch

from rlvr.models.policy import load_policy
from rlvr.rollout.hf import HFEngine
from rlvr.rollout.ranks import FullCopyEngine
from rlvr.training.distributed import DataParallel


def main(out: str) -> None:
    torch.manual_seed(0)
    model, tok = load_policy("builtin:tiny-llama", seed=0)
    dp = DataParallel("fsdp2", "gloo")
    sampling_copy = copy.deepcopy(model)
    initial = {k: v.detach().clone() for k, v in sampling_copy.state_dict().items()}
    model = dp.wrap(model)
    engine = FullCopyEngine(lambda m: HFEngine(m, tok), model, sampling_copy)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    ids = torch.arange(3, 19)[None].repeat(2, 1)
    model(input_ids=ids).logits.float().pow(2).mean().backward()
    optimizer.step()
    engine.load_weights(model, 1)
    diff = step = 0.0
    for name, p in model.named_parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        mine = sampling_copy.state_dict()[name]
        diff = max(diff, float((full.detach() - mine).abs().max()))
        step = max(step, float((full.detach() - initial[name]).abs().max()))
    with open(f"{out}.rank{dp.rank}", "w") as f:
        json.dump({"diff": diff, "step": step, "same_module": engine.inner.model is sampling_copy}, f)
    dp.close()


if __name__ == "__main__":
    main(sys.argv[1])
