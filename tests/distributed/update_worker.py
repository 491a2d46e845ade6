"""One GRPO update on a fixed batch, run as one process or under torchrun (DDP or FSDP2).

Usage: python update_worker.py MODE OUT [MU MINIBATCH [TEACHER]]   (MODE: none | ddp | fsdp2; MU
passes over minibatches of MINIBATCH rows, default 1 and 0 = the whole batch; TEACHER 1: on-policy
distillation with coef 1 from a tiny Llama of another seed, added to the GRPO loss; with
RLVR_TEACHER_URL set, that teacher is the vLLM server there, key in RLVR_VLLM_AUTHKEY). Rank 0 writes
the loss, grad norm, full (unsharded) gradients and the rows each rank's teacher scored to OUT; SGD with lr 0 leaves the weights unchanged, so the
gradients left on the parameters are the last optimizer step's, after clipping.
"""

import sys

import torch

from rlvr.algo.kl import KL_ESTIMATORS
from rlvr.algo.losses import AGGREGATIONS, LossSpec
from rlvr.models.policy import load_policy
from rlvr.models.batch import Batch
from rlvr.training.update import UpdateSpec, update_policy


def fixed_batch(vocab: int) -> Batch:
    g = torch.Generator().manual_seed(1)
    rows, tp, tc = 8, 6, 10
    prompt_ids = torch.randint(3, vocab, (rows, tp), generator=g)
    prompt_mask = torch.ones(rows, tp, dtype=torch.long)
    prompt_mask[::3, :2] = 0                                    # some left padding
    completion_ids = torch.randint(3, vocab, (rows, tc), generator=g)
    lengths = torch.tensor([10, 2, 7, 3, 9, 1, 5, 4])           # unequal token counts per rank
    completion_mask = (torch.arange(tc)[None] < lengths[:, None]).long()
    advantages = torch.tensor([1.0, -0.5, 0.0, 0.7, -1.2, 0.3, 0.0, -0.8])
    return Batch(prompt_ids, prompt_mask, completion_ids, completion_mask, advantages,
                 torch.zeros(rows, tc))


class Counted:
    """A teacher that counts the rows it is asked to score (each rank's share under torchrun)."""

    def __init__(self, inner):
        self.inner, self.rows = inner, 0

    def logprobs(self, batch, *args):
        self.rows += len(batch)
        return self.inner.logprobs(batch, *args)


def _teacher():
    import os

    if os.environ.get("RLVR_TEACHER_URL"):
        from rlvr.rollout.vllm.servers import _by_url
        from rlvr.training.teacher import ServerTeacher
        return ServerTeacher(_by_url([os.environ["RLVR_TEACHER_URL"]])[0])
    from rlvr.models.device import Device
    from rlvr.training.teacher import Teacher
    return Teacher(load_policy("builtin:tiny-llama", seed=1)[0], Device.cpu())


def main(mode: str, out: str, mu: int = 1, minibatch: int = 0, distill: int = 0) -> None:
    torch.manual_seed(0)
    model, _ = load_policy("builtin:tiny-llama", seed=0)
    dp = None
    if mode != "none":
        from rlvr.training.distributed import DataParallel
        dp = DataParallel(mode)
    train_model = dp.wrap(model) if dp else model
    optimizer = torch.optim.SGD(train_model.parameters(), lr=0.0)
    spec = UpdateSpec(LossSpec(kl_fn=KL_ESTIMATORS["k3"], agg_fn=AGGREGATIONS["token-mean"], eps_low=0.2,
                               eps_high=0.2, dual_clip=0.0, beta=0.0, entropy_coef=0.0,
                               distill_coef=float(distill)),
                      temperature=1.0, grad_clip=0.05,
                      mu=mu, minibatch_size=minibatch)
    batch = fixed_batch(model.config.vocab_size)
    teacher = None
    if distill:
        teacher = Counted(_teacher())
    stats = update_policy(train_model, optimizer, batch, spec, dp=dp,
                          generator=torch.Generator().manual_seed(5), teacher=teacher)
    scored = teacher.rows if teacher else 0
    scored = dp.all_gather(scored) if dp else [scored]
    grads = {}
    for name, p in train_model.named_parameters():
        grad = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
        grads[name.removeprefix("module.")] = grad.detach().clone()
    if dp is None or dp.rank == 0:
        torch.save({"loss": stats["loss"], "grad_norm": stats["grad_norm"], "grads": grads,
                    "distill_kl": stats.get("distill/kl"), "teacher_rows": scored}, out)
    if dp is not None:
        dp.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6]))
