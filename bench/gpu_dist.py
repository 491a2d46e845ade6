"""One-GPU smoke of rlvr's data parallelism under torchrun: DDP or FSDP2 over NCCL (gloo on a CPU).

    torchrun --standalone --nproc_per_node=1 bench/gpu_dist.py MODE     # MODE: ddp | fsdp2

One GRPO update of the built-in tiny Llama on a fixed batch, μ = 2 over two minibatches (the
old-log-prob forward runs first, as in a run), through `DataParallel.wrap`, against the same update
of an unwrapped copy in the same process; then the FSDP2/DDP sampling copy is refreshed from the
wrapped policy. Prints one JSON line: {"phase": "dist", "mode", "ok", "loss", "max_grad_diff", ...}
(ok: the largest gradient difference within 1e-3 of the largest gradient).
With one rank there is nothing to split: this proves the process group, the wrapping and the
collectives run on the device, not that several GPUs agree (tests/distributed does that on CPU).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def fixed_batch(vocab: int):
    from rlvr.models.batch import Batch

    g = torch.Generator().manual_seed(1)
    rows, tp, tc = 8, 6, 10
    lengths = torch.tensor([10, 2, 7, 3, 9, 1, 5, 4])
    return Batch(torch.randint(3, vocab, (rows, tp), generator=g), torch.ones(rows, tp, dtype=torch.long),
                 torch.randint(3, vocab, (rows, tc), generator=g),
                 (torch.arange(tc)[None] < lengths[:, None]).long(),
                 torch.tensor([1.0, -0.5, 0.0, 0.7, -1.2, 0.3, 0.0, -0.8]), torch.zeros(rows, tc))


def update(model, batch, device) -> tuple[dict, dict]:
    from rlvr.training.update import Compute, UpdateSpec, update_policy

    opt = torch.optim.SGD([p for p in model.parameters()], lr=0.0)   # lr 0: the grads stay to compare
    stats = update_policy(model, opt, batch, UpdateSpec(mu=2, minibatch_size=4, grad_clip=0.0),
                          compute=Compute(device), generator=torch.Generator().manual_seed(5))
    grads = {n.removeprefix("module."): (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad)
             for n, p in model.named_parameters()}
    return stats, grads


def main(mode: str) -> int:
    from rlvr.models.device import Device
    from rlvr.models.policy import load_policy
    from rlvr.rollout.hf import HFEngine
    from rlvr.training.distributed import DataParallel, FullCopyEngine

    dp = DataParallel(mode)
    device = Device.resolve("cuda" if dp.device.type == "cuda" else "cpu", bf16=False,
                            local_rank=dp.local_rank)
    model, tok = load_policy("builtin:tiny-llama", seed=0)
    model.to(device.torch)
    plain = copy.deepcopy(model)
    sampling = copy.deepcopy(model)
    batch = fixed_batch(model.config.vocab_size)
    wrapped = dp.wrap(model)
    stats, grads = update(wrapped, batch, device)
    _, want = update(plain, batch, device)
    diff = max(float((grads[k] - want[k]).abs().max()) for k in want)
    scale = max(float(g.abs().max()) for g in want.values())
    if mode == "fsdp2":
        engine = FullCopyEngine(lambda m: HFEngine(m, tok, device=device), wrapped, dp, sampling)
        engine.load_weights(wrapped, 1)
    backend = torch.distributed.get_backend()
    dp.close()
    # relative 1e-3: the unwrapped copy takes the fused forward, the wrapped model its own (float32)
    ok = diff <= 1e-3 * scale and scale > 0 and bool(torch.isfinite(torch.tensor(stats["loss"])))
    print(json.dumps({"phase": "dist", "mode": mode, "backend": backend, "device": str(device.torch),
                      "ok": ok, "loss": stats["loss"], "max_grad_diff": diff, "max_grad": scale}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
