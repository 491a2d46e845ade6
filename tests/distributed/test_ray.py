"""`rollout.engine: ray` on a local Ray cluster: 2 HF rollout actors in a placement group train
the quickstart task as well as the one-process run (|Δ accuracy| < 0.08 on 200 held-out problems:
2.3 standard deviations of the difference of two accuracies near 0.5)."""

from __future__ import annotations

import pytest

pytest.importorskip("ray", reason="ray is not installed (make venv-ray)")


def test_two_ray_actors_learn_like_one_process(tmp_path, cold_start_model, one_process_run):
    from quickrun import train_accuracy

    start, single = one_process_run
    ray_acc = train_accuracy(tmp_path, "ray", cold_start_model, rollout_extra=", engine: ray, workers: 2")
    print(f"held-out accuracy: cold start {start:.3f}, one process {single:.3f}, 2 Ray actors {ray_acc:.3f}")
    assert ray_acc > start + 0.05, (start, ray_acc)
    assert abs(ray_acc - single) < 0.08, (single, ray_acc)
