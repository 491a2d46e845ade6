"""Training doctor: each alarm provoked by synthetic records, quiet on healthy records and a real run."""

from __future__ import annotations

import json
import math

import pytest

from rlvr import config as config_mod
from rlvr.monitor.doctor import Doctor, behaviour_metrics
from rlvr.types import Completion, Group, Problem, Score

K = 4


def doctor(**kw) -> Doctor:
    overrides = [f"doctor.window={K}", f"doctor.cooldown={K}"] + [f"doctor.{k}={v}" for k, v in kw.items()]
    return Doctor(config_mod.load(None, overrides))


def healthy(step: int) -> dict:
    """A run that learns: reward rising with wiggle, half the groups informative, stable entropy."""
    wiggle = (-1) ** step * 0.03
    return {"step": step, "reward/mean": 0.2 + 0.01 * step + wiggle, "frac_reward_zero_std": 0.5,
            "completions/clipped_ratio": 0.05, "completions/mean_length": 32.0 + wiggle * 10,
            "entropy": 0.8 + wiggle, "ratio/max": 1.3, "ratio/min": 0.8, "loss": 0.01, "grad_norm": 0.5}


def feed(d: Doctor, records) -> list[tuple[int, str]]:
    return [(r["step"], a["name"]) for r in records for a in d.observe(r["step"], r)]


def run_with(change, steps: int = 3 * K, **kw) -> list[tuple[int, str]]:
    """Healthy records, with `change(step, record)` applied from step K on (after the baselines)."""
    records = []
    for s in range(steps):
        r = healthy(s)
        if s >= K:
            change(s, r)
        records.append(r)
    return feed(doctor(**kw), records)


def test_healthy_records_raise_nothing():
    assert feed(doctor(), [healthy(s) for s in range(50)]) == []


@pytest.mark.parametrize("name, change", [
    ("truncation", lambda s, r: r.update({"completions/clipped_ratio": 0.7})),
    ("zero_variance", lambda s, r: r.update({"frac_reward_zero_std": 0.95})),
    ("reward_flat", lambda s, r: r.update({"reward/mean": 0.0})),
    ("entropy_collapse", lambda s, r: r.update({"entropy": 0.05})),
    ("entropy_blowup", lambda s, r: r.update({"entropy": 4.0})),
    ("kl_blowup", lambda s, r: r.update({"kl": 2.5})),
    ("ratio_extreme", lambda s, r: r.update({"ratio/max": 40.0})),
    ("ratio_extreme", lambda s, r: r.update({"ratio/min": 0.01})),
    ("rollout_mismatch", lambda s, r: r.update({"mismatch/ratio_max": 40.0})),
    ("rollout_mismatch", lambda s, r: r.update({"mismatch/ratio_min": 0.01})),
    ("rollout_mismatch", lambda s, r: r.update({"mismatch/kl": 0.2})),
    ("length_explosion", lambda s, r: r.update({"completions/mean_length": 90.0})),
    ("non_finite", lambda s, r: r.update({"loss": float("nan")})),
    ("non_finite", lambda s, r: r.update({"grad_norm": float("inf")})),
    ("tampering", lambda s, r: r.update({"behaviour/tamper_rate": 0.2})),
    ("distill_kl_rising", lambda s, r: r.update({"distill/kl": 0.05 * s})),
])
def test_each_alarm_fires_on_its_symptom(name, change):
    fired = run_with(change)
    assert name in {n for _, n in fired}
    assert {n for _, n in fired} <= {name, "reward_flat"}   # a constant reward is also flat


@pytest.mark.parametrize("overrides, says, not_says", [
    ([], "grpo.is_correction=token", "max_staleness"),
    (["grpo.is_correction=token", "rollout.max_staleness=2"], "lower rollout.max_staleness (now 2)",
     "is_correction=token"),
    (["grpo.is_correction=sequence"], "caps 30% of tokens", "is_correction=token"),
])
def test_mismatch_advice_follows_the_configuration(overrides, says, not_says):
    cfg = config_mod.load(None, [f"doctor.window={K}"] + overrides)
    record = {**healthy(0), "mismatch/kl": 0.3, "mismatch/ratio_max": 12.0, "mismatch/ratio_min": 0.5,
              "mismatch/truncated_frac": 0.3}
    [alarm] = Doctor(cfg).observe(0, record)
    assert alarm["name"] == "rollout_mismatch" and "0.3" in alarm["message"]
    assert says in alarm["action"] and not_says not in alarm["action"]


@pytest.mark.parametrize("kl", [
    lambda s: 1.0 / (1 + s),                        # falling: the student approaches the teacher
    lambda s: 0.3 + (-1) ** s * 0.1,                # noisy but flat
    lambda s: 0.3 + 0.001 * s,                      # rising by less than distill_kl_rise over K steps
])
def test_distill_kl_alarm_is_quiet_unless_it_rises_steadily(kl):
    assert run_with(lambda s, r: r.update({"distill/kl": kl(s)})) == []


def test_windowed_alarms_need_k_steps_in_a_row():
    fired = run_with(lambda s, r: r.update({"frac_reward_zero_std": 0.95}), steps=2 * K - 1)
    assert fired == []                                      # K - 1 bad steps: not yet
    fired = run_with(lambda s, r: r.update({"frac_reward_zero_std": 0.95}), steps=2 * K)
    assert fired == [(2 * K - 1, "zero_variance")]


def test_cooldown_and_messages_name_cause_and_action():
    d = doctor()
    alarms = [a for s in range(12) for a in d.observe(s, {**healthy(s), "completions/clipped_ratio": 0.9})]
    assert len(alarms) == 3                                 # steps 0, 4, 8 with cooldown 4
    assert "90%" in alarms[0]["message"] and "max_new_tokens" in alarms[0]["action"]


def test_disabled_doctor_is_silent():
    assert feed(doctor(enabled="false"), [{**healthy(s), "loss": float("nan")} for s in range(5)]) == []


def test_state_round_trip_repeats_the_same_alarms():
    records = [healthy(s) for s in range(K)] + [{**healthy(s), "entropy": 0.01} for s in range(K, 3 * K)]
    a = doctor()
    feed(a, records[:K + 1])
    b = doctor()
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert feed(a, records[K + 1:]) == feed(b, records[K + 1:])


def completion(text: str, flags=()) -> Completion:
    return Completion(text=text, token_ids=[1], logprobs=[0.0], finish_reason="stop",
                      score=Score(0.0, False, tuple(flags)))


def test_behaviour_metrics_hand_counted():
    p = Problem(id="x", prompt="q")
    g = Group(p, [1], [completion("12, wait, let me check: 13"), completion("Verify: 7"),
                       completion("answer 5 или 6", ("multiple_answers",)), completion("42")])
    m = behaviour_metrics([g])
    assert m["behaviour/reflection_rate"] == 0.5            # "wait"/"let me check", "Verify"
    assert m["behaviour/mixed_script_rate"] == 0.25         # Latin + Cyrillic letters
    assert m["behaviour/multi_answer_rate"] == 0.25
    assert m["behaviour/tamper_rate"] == 0.0
    g.completions[1].score = Score(1.0, False, ("tamper_attempt",))
    assert behaviour_metrics([g])["behaviour/tamper_rate"] == 0.25


def test_tiny_real_run_with_learning_signal_raises_no_alarm(tmp_path):
    import torch

    from rlvr.monitor.log import read_metrics
    from rlvr.train import train
    from rlvr.verifiers.base import CallableVerifier, register_verifier

    torch.set_num_threads(1)

    # A random model rarely emits EOS early: 100 new tokens keep truncation well under half.
    def has_a_one(completions, **_):                       # about half of random outputs pass
        return [float("1" in c) for c in completions]

    register_verifier("test_has_one", lambda **_: CallableVerifier(has_a_one, "test_has_one"))
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i}+{i}=", "reference": str(2 * i),
                                        "verifier": "test_has_one"}) + "\n" for i in range(8)))
    cfg = config_mod.load(None, [
        "model.path=builtin:tiny-llama", f"run.dir={tmp_path / 'run'}", "data.task=",
        f"data.train_path={data}", "grpo.steps=6", "grpo.group_size=4", "grpo.prompts_per_step=4",
        "rollout.max_new_tokens=100", "run.eval_every=0", "run.progress=false", "run.report=false",
        "run.threads=1", "run.transcripts_every=0", "data.heldout_size=0", "doctor.window=3"])
    train(cfg)
    lines = read_metrics(tmp_path / "run")
    steps = [r for r in lines if "reward/mean" in r]
    assert len(steps) == 6 and all("entropy" in r and math.isfinite(r["entropy"]) for r in steps)
    assert 0 < sum(r["reward/mean"] for r in steps) / 6 < 1
    assert [r for r in lines if r.get("event") == "alarm"] == []


def _judged(judge_slope: float, rule_slope: float):
    def change(s: int, r: dict) -> None:
        r.update({"rewards/judged/mean": 0.2 + judge_slope * (s - K),
                  "rewards/rule_based/mean": 0.3 + rule_slope * (s - K)})
    return change


def test_judge_rise_fires_when_only_the_judge_climbs():
    assert ("judge_rise" in {n for _, n in run_with(_judged(0.05, 0.0))})
    assert ("judge_rise" not in {n for _, n in run_with(_judged(0.05, 0.02))})   # rules rise too
    assert ("judge_rise" not in {n for _, n in run_with(_judged(0.01, 0.0))})    # 0.03 over K < 0.1


def test_judged_and_rule_based_means_come_from_model_terms():
    from rlvr.monitor.stats import per_verifier_metrics

    def comp(judge, rule):
        details = {"terms": {"judge": judge, "exact": rule}, "weights": {"judge": 1.0, "exact": 1.0},
                   "model_terms": ["judge"]}
        return Completion("x", [1], [0.0], "stop", score=Score(judge + rule, False, (), None, details))

    g = Group(Problem("p", "q", verifier="reward_funcs"), [1], [comp(1.0, 0.0), comp(0.5, 1.0)])
    m = per_verifier_metrics([g])
    assert m["rewards/judged/mean"] == 0.75 and m["rewards/rule_based/mean"] == 0.5
