"""Rollouts generated ahead of their step: the staleness bound, drops, and the saved buffer."""

from types import SimpleNamespace

from rlvr.training.rollouts import Rollouts
from rlvr.types import Group, Problem


class _Source:
    """What `Rollouts.take` uses of the rollout source: a sampler, generate() and the step's extras."""

    def __init__(self):
        self.extras, self.calls = {}, []
        self.sampler = SimpleNamespace(next_batch=lambda step: [Problem(id=f"p{step}", prompt="")])

    def generate(self, problems, step, engine=None, extras=None):
        self.calls.append(step)
        return [Group(p, [1], [], policy_version=step) for p in problems]


def _rollouts(k, buffer):
    r = Rollouts(_Source(), k)
    r.load_state_dict({"buffer": buffer, "dropped": 0})
    return r


def test_buffered_groups_within_the_bound_are_used_as_they_are():
    r = _rollouts(2, {5: (3, [Group(Problem(id="old", prompt=""), [1], [], policy_version=3)], {"x": 1.0})})
    groups = r.take(5)
    assert [g.problem.id for g in groups] == ["old"] and r.source.calls == []
    assert r.source.extras == {"x": 1.0, "async/staleness": 2.0, "async/dropped_groups": 0.0}


def test_groups_older_than_the_bound_are_dropped_counted_and_regenerated():
    stale = [Group(Problem(id=f"old{i}", prompt=""), [1], [], policy_version=3) for i in range(2)]
    r = _rollouts(1, {5: (3, stale, {})})          # resumed with a smaller k: 5 - 3 > 1
    groups = r.take(5)
    assert [g.problem.id for g in groups] == ["p5"] and r.source.calls == [5]
    assert r.source.extras["async/dropped_groups"] == 2.0 and r.source.extras["async/staleness"] == 0.0
    assert r.state_dict()["dropped"] == 2


def test_synchronous_rollouts_generate_at_the_step_and_report_no_async_metrics():
    r = _rollouts(0, {})
    r.ahead(0, policy=None)
    assert [g.problem.id for g in r.take(0)] == ["p0"] and r.source.extras == {}
