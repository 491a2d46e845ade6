"""Rollouts generated ahead of their step: the staleness bound, drops, and the saved buffer, as the
rollout source's schedule (`Rollouts`) decides them and `RolloutSource.take` returns them."""

from types import SimpleNamespace

from rlvr import config
from rlvr.training.source import RolloutSource, Rollouts
from rlvr.types import Group, Problem


class _Engine:
    prompts = SimpleNamespace(pad_id=0, vocab_limit=None)

    def __init__(self):
        self.calls = []

    def generate(self, problems, n, params, seed):
        self.calls.append(seed)
        return [Group(p, [1], [], policy_version=7) for p in problems]


class _Sampler:
    def next_batch(self, step):
        return [Problem(id=f"p{step}", prompt="")]


def _source(k, buffer):
    cfg = config.from_dict({}, [f"rollout.max_staleness={k}"])
    none = SimpleNamespace(score_batch=lambda responses, problems: [])   # groups without completions
    source = RolloutSource(cfg, _Engine(), {"math": none}, _Sampler())
    source.rollouts.load_state_dict({"buffer": buffer, "dropped": 0})
    return source


def test_buffered_groups_within_the_bound_are_used_as_they_are():
    source = _source(2, {5: (3, [Group(Problem(id="old", prompt=""), [1], [], policy_version=3)], {"x": 1.0})})
    groups, metrics = source.take(5)
    assert [g.problem.id for g in groups] == ["old"] and source.engine.calls == []
    assert metrics == {"x": 1.0, "async/staleness": 2.0, "async/dropped_groups": 0.0}


def test_groups_older_than_the_bound_are_dropped_counted_and_regenerated():
    stale = [Group(Problem(id=f"old{i}", prompt=""), [1], [], policy_version=3) for i in range(2)]
    source = _source(1, {5: (3, stale, {})})          # resumed with a smaller k: 5 - 3 > 1
    groups, metrics = source.take(5)
    assert [g.problem.id for g in groups] == ["p5"] and len(source.engine.calls) == 1
    assert metrics["async/dropped_groups"] == 2.0 and metrics["async/staleness"] == 5 - 7
    assert source.rollouts.state_dict()["dropped"] == 2


def test_synchronous_rollouts_generate_at_the_step_and_report_no_async_metrics():
    source = _source(0, {})
    source.ahead(0, policy=None)
    groups, metrics = source.take(0)
    assert [g.problem.id for g in groups] == ["p0"] and not any(k.startswith("async/") for k in metrics)


def test_the_schedule_starts_step_plus_k_once_and_never_past_the_last_step():
    r = Rollouts(2, total_steps=5)
    assert r.due(0) == 2 and r.due(3) is None and Rollouts(0).due(0) is None
    r.start(2, 0, lambda: ([Group(Problem(id="a", prompt=""), [1], [], policy_version=0)], {"m": 1.0}))
    r.wait()
    assert r.due(0) is None                             # already buffered
    groups, metrics = r.pop(2)
    assert [g.problem.id for g in groups] == ["a"] and metrics == {"m": 1.0} and r.pop(2) is None
