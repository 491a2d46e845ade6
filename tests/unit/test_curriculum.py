"""Pass-rate tracker, curriculum sampler and dynamic sampling: hand-computed cases + one tiny run."""

from __future__ import annotations

import json
import math

import pytest

from rlvr import config as config_mod
from rlvr.config import CurriculumConfig
from rlvr.sampling.curriculum import CurriculumSampler, PassRateTracker, dynamic_sample, reward_std
from rlvr.errors import ConfigError
from rlvr.types import Completion, Group, Problem, Score


def problem(i: int) -> Problem:
    return Problem(id=f"p{i}", prompt=f"{i}+0=", reference=str(i), verifier="arithmetic")


def group(p: Problem, correct: list[int]) -> Group:
    comps = [Completion(text="", token_ids=[1], logprobs=[0.0], finish_reason="stop",
                        score=Score(float(c), bool(c))) for c in correct]
    return Group(problem=p, prompt_ids=[1], completions=comps)


def test_tracker_counts_ema_recent_and_last_step():
    t = PassRateTracker(ema=0.5, window=2)
    t.update("a", 2, 4, step=0)            # 0.5: the first observation is the estimate
    t.update("a", 4, 4, step=3)            # 0.5*0.5 + 0.5*1.0 = 0.75
    t.update("a", 1, 4, step=5)            # 0.5*0.75 + 0.5*0.25 = 0.5
    s = t.stats["a"]
    assert (s["groups"], s["completions"], s["correct"]) == (3, 12, 7)
    assert s["ema"] == pytest.approx(0.5)
    assert s["recent"] == [1.0, 0.25]      # window 2 keeps the last two
    assert s["last_step"] == 5
    assert t.estimate("missing") is None


def test_tracker_export_then_import_seeds_estimates(tmp_path):
    t = PassRateTracker()
    t.update("a", 3, 4, step=7)
    t.update("b", 0, 4, step=2)
    path = t.export(tmp_path / "rates.jsonl")
    rows = [json.loads(l) for l in path.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "b"] and rows[0]["recent_mean"] == 0.75
    fresh = PassRateTracker()
    assert fresh.import_file(path, {"a"}) == 1          # only ids in this run's pool
    assert fresh.estimate("a") == 0.75 and fresh.estimate("b") is None
    assert fresh.last_step("a") == 0                    # counted as seen at this run's start


def cfg(**kw) -> CurriculumConfig:
    base = dict(enabled=True, low=0.1, high=0.9, ema=1.0, recheck_every=10, pool_size=8)
    base.update(kw)
    return CurriculumConfig(**base)


def test_status_band_retire_defer_and_recheck():
    pool = [problem(i) for i in range(4)]
    s = CurriculumSampler(pool, 2, seed=0, cfg=cfg())
    s.step = 0
    s.observe([group(pool[0], [1, 0, 0, 0]), group(pool[1], [1, 1, 1, 1]), group(pool[2], [0, 0, 0, 0])])
    assert [s.status(p.id, 1) for p in pool] == ["active", "retired", "deferred", "unseen"]
    assert s.status("p1", 9) == "retired"
    assert s.status("p1", 10) == "due" and s.status("p2", 10) == "due"


def test_recheck_defaults_to_one_epoch():
    s = CurriculumSampler([problem(i) for i in range(10)], 4, seed=0, cfg=cfg(recheck_every=0))
    assert s.recheck == 3                                # ceil(10 / 4)


def test_batches_sweep_oldest_first_and_skip_retired_and_deferred():
    pool = [problem(i) for i in range(8)]
    s = CurriculumSampler(pool, 3, seed=0, cfg=cfg(recheck_every=100))
    s.step = 0
    s.observe([group(pool[4], [1, 1]), group(pool[5], [0, 0])])   # p4 retired, p5 deferred
    s.step = 1
    s.observe([group(pool[i], [1, 0]) for i in range(4)])          # p0..p3 active, seen at 1
    batch = [p.id for p in s.next_batch(2)]
    assert sorted(batch[:2]) == ["p6", "p7"]                       # unseen first
    assert batch[2] in {"p0", "p1", "p2", "p3"}                    # then the oldest in-band
    assert batch == [p.id for p in s.next_batch(2)]               # same step, same draw
    s.observe([group(p, [1, 0]) for p in s.next_batch(2)])
    later = {p.id for p in s.next_batch(3)}
    assert later <= {"p0", "p1", "p2", "p3"} and batch[2] not in later


def test_everything_filtered_falls_back_to_the_oldest():
    pool = [problem(i) for i in range(3)]
    s = CurriculumSampler(pool, 2, seed=0, cfg=cfg(recheck_every=100))
    s.observe([group(p, [1, 1]) for p in pool])                    # all retired at step 0
    assert len(s.next_batch(1)) == 2


def test_plain_pool_mode_sweeps_every_problem_before_repeating():
    pool = [problem(i) for i in range(6)]
    s = CurriculumSampler(pool, 3, seed=1, cfg=cfg(), band=False)
    seen = []
    for step in range(2):
        batch = s.next_batch(step)
        seen += [p.id for p in batch]
        s.observe([group(p, [1, 1]) for p in batch])               # solved: ignored without a band
    assert sorted(seen) == sorted(p.id for p in pool)


def test_state_round_trip_is_exact_and_plain():
    pool = [problem(i) for i in range(12)]

    def drive(sampler, steps):
        out = []
        for step in steps:
            batch = sampler.next_batch(step)
            out.append([p.id for p in batch])
            sampler.observe([group(p, [int(p.id[1:]) % 3 == 0, step % 2]) for p in batch])
        return out

    a = CurriculumSampler(pool, 4, seed=3, cfg=cfg(recheck_every=4))
    first = drive(a, range(5))
    state = json.loads(json.dumps(a.state_dict()))                # plain types only
    b = CurriculumSampler(pool, 4, seed=3, cfg=cfg(recheck_every=4))
    b.load_state_dict(state)
    assert drive(a, range(5, 12)) == drive(b, range(5, 12))
    assert a.state_dict() == b.state_dict() and first


def test_dynamic_sampling_drops_zero_variance_and_refills():
    pool = [problem(i) for i in range(10)]
    rewards = {"p0": [1, 1], "p1": [0, 1], "p2": [0, 0], "p3": [1, 0], "p4": [0, 1], "p5": [1, 1]}
    calls = []

    def generate(batch, rnd):
        calls.append(([p.id for p in batch], rnd))
        return [group(p, rewards.get(p.id, [0, 0])) for p in batch]

    def more(rnd, count, used):
        assert rnd >= 1 and {"p0", "p1", "p2"} <= used
        return [p for p in pool if p.id not in used][:count]

    out = dynamic_sample(pool[:3], 3, generate, more, group_size=2, max_rounds=3, std_tol=1e-6)
    assert calls == [(["p0", "p1", "p2"], 0), (["p3", "p4"], 1)]
    assert [g.problem.id for g in out.groups] == ["p1", "p3", "p4"]
    assert sorted(g.problem.id for g in out.unused) == ["p0", "p2"]
    m = out.metrics()
    assert m["dynamic/generated_completions"] == 10 and m["dynamic/rounds"] == 2
    assert m["dynamic/completions_per_kept_group"] == pytest.approx(10 / 3)


def test_dynamic_sampling_budget_tops_up_with_dropped_groups():
    pool = [problem(i) for i in range(10)]
    out = dynamic_sample(pool[:2], 2, lambda b, r: [group(p, [1, 1]) for p in b],
                         lambda r, k, used: [p for p in pool if p.id not in used][:k],
                         group_size=2, max_rounds=5, std_tol=1e-6, oversample=2.0, max_completions=8)
    assert out.generated == 8 and out.rounds == 2                 # 4 + 4 (budget 8) completions
    assert len(out.groups) == 2 and out.informative == 0
    assert len(out.unused) == 2


def test_reward_std_tolerates_continuous_rewards():
    g = group(problem(0), [0.5, 0.5])
    assert reward_std(g) == 0.0
    g.completions[0].score = Score(0.5000001, False)
    assert 0 < reward_std(g) < 1e-6                               # below the default std_tol


def test_config_rejects_bad_curriculum_values():
    with pytest.raises(ConfigError, match="curriculum.recheck_every"):
        config_mod.load(None, ["curriculum.recheck_every=-1"])
    with pytest.raises(ConfigError, match="dynamic_sampling.oversample"):
        config_mod.load(None, ["dynamic_sampling.oversample=0.5"])


def test_tiny_run_resumes_curriculum_and_dynamic_sampling_exactly(tmp_path):
    import torch

    from rlvr.training.checkpoint import latest, load_state
    from rlvr.monitor.log import read_metrics
    from rlvr.train import train

    torch.set_num_threads(1)
    common = ["model.path=builtin:tiny-llama", "grpo.group_size=2", "grpo.prompts_per_step=2",
              "rollout.max_new_tokens=4", "data.heldout_size=2", "run.progress=false",
              "run.report=false", "run.threads=1", "run.eval_every=0", "run.transcripts_every=0",
              "curriculum.enabled=true", "curriculum.pool_size=16", "dynamic_sampling.enabled=true",
              "dynamic_sampling.max_rounds=2", "rollout.temperature=3.0",
              "grpo.lr_schedule=constant"]
    whole = config_mod.load(None, common + [f"run.dir={tmp_path / 'a'}", "grpo.steps=4", "run.save_every=4"])
    train(whole)
    part = config_mod.load(None, common + [f"run.dir={tmp_path / 'b'}", "grpo.steps=4", "run.save_every=2"])
    train(config_mod.replace(part, ["grpo.steps=2"]))
    train(part)                                                   # resumes from step 2

    def clean(run):
        return [{k: v for k, v in r.items() if not k.startswith(("timing/", "time", "tokens_per_s"))}
                for r in read_metrics(tmp_path / run) if "reward/mean" in r]     # step lines

    assert clean("a") == clean("b")
    sa = load_state(latest(tmp_path / "a" / "checkpoints"))
    sb = load_state(latest(tmp_path / "b" / "checkpoints"))
    assert sa["sampler"] == sb["sampler"] and sa["sampler"]["tracker"]
    assert sa["doctor"] == sb["doctor"]
    assert len(clean("a")) == 4 and not math.isnan(sum(r["reward/mean"] for r in clean("a")))
