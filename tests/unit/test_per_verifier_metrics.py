"""Per-verifier metrics of a mixed batch (hand-counted), and the doctor's per-task alarm."""

from __future__ import annotations

import pytest

from rlvr import config as config_mod
from rlvr.monitor.doctor import Doctor
from rlvr.monitor.stats import per_verifier_metrics
from rlvr.types import Completion, Group, Problem, Score


def group(verifier: str, rewards, correct=None, terms=None) -> Group:
    correct = correct or [r > 0 for r in rewards]
    comps = [Completion("x", [1], [0.0], "stop", Score(r, c, (), None, {"terms": t} if t else None))
             for r, c, t in zip(rewards, correct, terms or [None] * len(rewards))]
    return Group(Problem("p", "q", verifier=verifier), [1], comps)


def test_per_verifier_mean_accuracy_share_and_trl_terms():
    groups = [group("math", [1, 0, 0, 1]), group("math", [0, 0, 0, 0]),
              group("reward_funcs", [0.5, 2.0, 0.0, 0.0], [True, True, False, False],
                    [{"acc": 1.0, "fmt": None}, {"acc": 1.0, "fmt": 1.0}, {"acc": 0.0, "fmt": None},
                     {"acc": 0.0, "fmt": 0.0}])]
    m = per_verifier_metrics(groups)
    assert m["reward/math/mean"] == 0.25 and m["reward/math/accuracy"] == 0.25
    assert m["reward/math/share"] == pytest.approx(8 / 12) and m["reward/reward_funcs/share"] == pytest.approx(4 / 12)
    assert m["reward/math/frac_zero_std"] == 0.5 and m["reward/reward_funcs/frac_zero_std"] == 0.0
    assert m["reward/reward_funcs/mean"] == 0.625 and m["reward/reward_funcs/accuracy"] == 0.5
    assert m["rewards/acc/mean"] == 0.5 and m["rewards/fmt/mean"] == 0.5   # None rows left out


def test_doctor_names_the_task_that_stopped_teaching_in_a_mixed_run():
    cfg = config_mod.load(None, ["doctor.window=3", "doctor.cooldown=100"])
    mixed, single = Doctor(cfg), Doctor(cfg)
    fired = []
    for step in range(4):
        rec = {"reward/mean": 0.1 * step, "frac_reward_zero_std": 0.5,
               "reward/rg.gcd/frac_zero_std": 1.0, "reward/rg.basic_arithmetic/frac_zero_std": 0.2}
        fired += [(step, a["name"], a["message"]) for a in mixed.observe(step, rec)]
        assert single.observe(step, {"reward/mean": 0.1 * step, "reward/math/frac_zero_std": 1.0}) == []
    assert [(s, n) for s, n, _ in fired] == [(2, "task_zero_variance")] and "rg.gcd" in fired[0][2]
