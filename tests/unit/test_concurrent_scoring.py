"""Concurrent scoring: a step's groups reach each verifier as one batch, spread over its workers;
async reward functions; a failing call or group costs only its own rows."""

from __future__ import annotations

import json
import time

import pytest

from rlvr.evaluation.metrics import score_groups
from rlvr.types import Completion, Group, Problem, Score
from rlvr.verifiers.reward_funcs import RewardFunctionsVerifier

REWARDS_FILE = '''
import asyncio, json, os, time
def stamp(tag, n):
    with open(os.environ["STAMPS"], "a") as f:
        f.write(json.dumps([tag, os.getpid(), time.time(), n]) + "\\n")
def sleepy(completions, **kwargs):
    t0 = time.time(); time.sleep(0.5); stamp("sync", len(completions))
    return [float(len(c)) for c in completions]
async def sleepy_async(completions, **kwargs):
    await asyncio.sleep(0.5); stamp("async", len(completions))
    return [1.0 for c in completions]
def hang_on_slow(completions, **kwargs):
    if any(c == "slow" for c in completions):
        time.sleep(30)
    return [1.0 for c in completions]
'''


def _groups(texts_P_G, verifier="reward_funcs"):
    return [Group(Problem(f"p{i}", "q", "1", verifier), [1],
                  [Completion(t, [1], [0.0], "stop") for t in texts]) for i, texts in enumerate(texts_P_G)]


class Recording:
    """A verifier that records its batches and refuses one problem (a bug in a verifier)."""
    name = "rec"

    def __init__(self):
        self.calls: list[int] = []

    def check_reference(self, problem):
        return None

    def score_batch(self, responses, problems):
        self.calls.append(len(responses))
        if any(p.id == "p1" for p in problems):
            raise RuntimeError("cannot score p1")
        return [Score(1.0, True) for _ in responses]


def test_one_batch_per_verifier_and_a_failing_group_costs_only_itself():
    rec = Recording()
    groups = _groups([["a", "b"], ["c", "d"], ["e", "f"]], "rec")
    score_groups(groups, {"rec": rec})
    assert rec.calls[0] == 6                          # the step's groups together
    assert rec.calls[1:] == [2, 2, 2]                 # then asked group by group
    assert [c.score.reward for c in groups[0].completions + groups[2].completions] == [1.0] * 4
    assert all("verifier_error" in c.score.flags for c in groups[1].completions)


def _verifier(tmp_path, monkeypatch, fn, workers, **extra):
    (tmp_path / "r.py").write_text(REWARDS_FILE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STAMPS", str(tmp_path / "stamps.jsonl"))
    v = RewardFunctionsVerifier(terms=[{"fn": f"r.py:{fn}", **extra}], workers=workers)
    v.pool.warm()
    return v


@pytest.mark.parametrize("fn", ["sleepy", "sleepy_async"])
def test_a_functions_batch_runs_in_all_workers_at_once(tmp_path, monkeypatch, fn):
    v = _verifier(tmp_path, monkeypatch, fn, workers=2)
    try:
        groups = _groups([["ab", "c"]] * 4)
        score_groups(groups, {"reward_funcs": v})
        rows = [json.loads(x) for x in (tmp_path / "stamps.jsonl").read_text().splitlines()]
        assert len(rows) == 2 and rows[0][1] != rows[1][1]      # two calls, two worker processes
        assert sorted(r[3] for r in rows) == [4, 4]             # each a half of the step's 8
        assert abs(rows[0][2] - rows[1][2]) < 0.4               # finished together: they overlapped
        assert [c.score.reward for c in groups[0].completions] == ([2.0, 1.0] if fn == "sleepy" else [1.0, 1.0])
    finally:
        v.close()


def test_a_call_that_overruns_costs_only_its_own_rows(tmp_path, monkeypatch):
    v = _verifier(tmp_path, monkeypatch, "hang_on_slow", workers=2, timeout_s=1.0)
    try:
        groups = _groups([["ok", "ok"], ["slow", "ok"]])
        t0 = time.perf_counter()
        score_groups(groups, {"reward_funcs": v})
        assert time.perf_counter() - t0 < 5
        first, second = groups[0].completions, groups[1].completions
        assert [c.score.reward for c in first] == [1.0, 1.0] and not first[0].score.flags
        assert all("term_errors" not in c.score.details for c in first)   # no crash counted for them
        assert all(c.score.flags == ("timeout",) and "term_errors" in c.score.details for c in second)
    finally:
        v.close()
