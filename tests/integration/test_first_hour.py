"""A new user's first hour (issue 30), end to end on the tiny model: nothing fails silently."""

import json

from rlvr.cli.main import main

BOOM = '''
def boom(completions, **kwargs):
    return [len(c) for c in completions] + None   # a TypeError in user code
'''


def _write_run(tmp_path, *extra: str) -> list[str]:
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i}+1=", "solution": str(i + 1)}) + "\n"
                            for i in range(4)))
    return ["train", "quickstart", "model.path=builtin:tiny-llama", f"run.dir={tmp_path / 'run'}",
            "data.task=", f"data.train_path={data}", "data.heldout_size=0", "run.progress=false",
            "run.threads=1", "run.report=false", "run.eval_every=0", "run.save_every=0",
            "rollout.max_new_tokens=4", "grpo.steps=3", "grpo.group_size=2", "grpo.prompts_per_step=2",
            "doctor.cooldown=0", *extra]


def _lines(tmp_path):
    return [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]


def test_a_reward_function_that_raises_is_reported_once_and_alarmed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_rewards.py").write_text(BOOM)
    code = main(_write_run(tmp_path, "data.reward_funcs=[{fn: 'my_rewards.py:boom'}]"))
    out = capsys.readouterr().out
    assert code == 0
    lines = _lines(tmp_path)
    events = [r for r in lines if r.get("event") == "reward_crash"]
    assert len(events) == 1 and events[0]["term"] == "boom" and events[0]["step"] == 0
    assert "TypeError" in events[0]["error"] and "my_rewards.py" in events[0]["traceback"]
    assert [r["rewards/boom/crash_rate"] for r in lines if "reward/mean" in r] == [1.0, 1.0, 1.0]
    alarms = [r for r in lines if r.get("event") == "alarm" and r["name"] == "reward_crash"]
    assert [a["step"] for a in alarms] == [0, 1, 2] and "boom (100%)" in alarms[0]["message"]
    assert out.count("[reward_crash]") == 1 and out.count("Traceback (most recent call last)") == 1
    assert "return [len(c) for c in completions] + None" in out


def test_strict_rewards_stops_the_run_at_the_first_failure(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_rewards.py").write_text(BOOM)
    code = main([*_write_run(tmp_path, "data.reward_funcs=[{fn: 'my_rewards.py:boom'}]"), "--strict-rewards"])
    err = capsys.readouterr().err
    assert code == 2 and "reward term 'boom' failed at step 0" in err and "TypeError" in err
    assert [r["step"] for r in _lines(tmp_path) if "reward/mean" in r] == [0]
