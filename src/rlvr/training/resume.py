"""What a checkpoint holds beyond the weights, and how a run is put back to that state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr.training import checkpoint


def trainer_state(run, done: int) -> dict[str, Any]:
    return {
        "step": done,
        "optimizer": run.dp.full_optim_state(run.train_model, run.optimizer) if run.dp
        else run.optimizer.state_dict(),
        "scheduler": run.scheduler.state_dict(),
        "sampler": run.sampler.state_dict(),
        "doctor": run.doctor.state_dict(),
        "rng": checkpoint.rng_state(),
        "metrics_offsets": run.log_out.offsets(),
        "best": [run.best[0], str(run.best[1]) if run.best[1] else None],
        "bad_steps": run.bad_steps,
        "rollouts": run.rollouts.state_dict(),     # groups generated ahead of their step
    }


def restore(run, ckpt: Path) -> None:
    state = checkpoint.load_state(ckpt)
    if run.dp is not None and run.dp.mode == "fsdp2":
        run.dp.load_full_state(run.train_model, run.optimizer, checkpoint.read_weights(ckpt),
                               state["optimizer"])
    else:
        checkpoint.load_weights(run.policy, ckpt)
        run.optimizer.load_state_dict(state["optimizer"])
    run.scheduler.load_state_dict(state["scheduler"])
    run.sampler.load_state_dict(state["sampler"])
    run.doctor.load_state_dict(state.get("doctor", {}))
    checkpoint.set_rng_state(state["rng"])
    if run.is_main:
        run.log_out.truncate_to(state["metrics_offsets"])
    best_metric, best_path = state.get("best", [float("-inf"), None])
    run.best = (best_metric, Path(best_path) if best_path else None)
    run.bad_steps = state.get("bad_steps", 0)
    run.rollouts.load_state_dict(state.get("rollouts", {}))
    run.start_step = state["step"]
    run.engine.load_weights(run.policy, run.start_step)
