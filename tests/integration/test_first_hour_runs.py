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


def _config_yaml(tmp_path) -> str:
    return (tmp_path / "run" / "config.yaml").read_text()


def test_resume_says_where_it_resumed_and_refuses_a_changed_config(tmp_path, capsys):
    base = _write_run(tmp_path, "data.verifier=math", "run.save_every=1", "grpo.steps=2",
                      "grpo.lr_schedule=constant")
    assert main(base) == 0
    first = _config_yaml(tmp_path)
    lines = (tmp_path / "run" / "metrics.jsonl").read_text()
    capsys.readouterr()
    assert main(base) == 0                          # the same config: a finished run, said so
    out = capsys.readouterr().out
    assert "resuming from" in out and "step-000002 (step 2 of 2)" in out and "nothing to train" in out
    code = main([*base, "grpo.group_size=4", "rollout.temperature=0.5"])   # alters the run: refused
    err = capsys.readouterr().err
    assert code == 2, err
    assert "grpo.group_size: 2 -> 4" in err and "rollout.temperature: 1.0 -> 0.5" in err
    assert "run.resume_allow_changes=true" in err
    assert _config_yaml(tmp_path) == first and (tmp_path / "run" / "metrics.jsonl").read_text() == lines
    assert main([*base, "grpo.steps=3", "doctor.window=3"]) == 0   # constant LR: more steps are fine
    out = capsys.readouterr().out
    assert "resuming from" in out and "(step 2 of 3)" in out and "grpo.steps: 2 -> 3" in out
    assert _config_yaml(tmp_path) == first                          # the config steps 0-1 saw
    resumed = tmp_path / "run" / "config.resume-step-000002.yaml"
    assert "steps: 3" in resumed.read_text() and "steps: 2" in first
    assert main([*base, "grpo.steps=4", "grpo.group_size=4", "run.resume_allow_changes=true"]) == 0
    assert "group_size: 4" in (tmp_path / "run" / "config.resume-step-000003.yaml").read_text()
    assert _config_yaml(tmp_path) == first


def test_cosine_schedule_refuses_more_steps_on_resume(tmp_path, capsys):
    base = _write_run(tmp_path, "data.verifier=math", "run.save_every=1", "grpo.steps=1")
    assert main(base) == 0
    capsys.readouterr()
    assert main([*base, "grpo.steps=2"]) == 2
    assert "grpo.steps: 1 -> 2" in capsys.readouterr().err


def test_a_log_that_is_not_a_terminal_gets_a_banner_and_plain_metrics_lines(tmp_path, capsys):
    # stdout is captured, not a terminal: no bar even with run.progress=true
    assert main(_write_run(tmp_path, "data.verifier=math", "run.log_every=2", "run.progress=true")) == 0
    out = capsys.readouterr().out.splitlines()
    head = "\n".join(out[:6])
    assert "model: builtin:tiny-llama" in head and "train.jsonl (4 problems)" in head
    assert "verifiers: math" in head and "device: cpu" in head and "threads: 1" in head
    plain = [line for line in out if line.startswith("step ")]
    assert [line.split()[1] for line in plain] == ["2/3", "3/3"], out
    assert "reward " in plain[0] and "s/step" in plain[0] and "eta " in plain[0]
    assert "no held-out evaluation" in out[-1] and "None" not in out[-1]   # data.heldout_size=0


def test_the_curriculum_logs_where_its_pool_stands(tmp_path):
    assert main(_write_run(tmp_path, "data.verifier=math", "curriculum.enabled=true")) == 0
    steps = [r for r in _lines(tmp_path) if "reward/mean" in r]
    for r in steps:
        counts = [r[f"curriculum/{k}"] for k in ("active", "retired", "deferred", "due", "unseen")]
        assert sum(counts) == 4                                    # the pool: the file's 4 rows
    assert steps[0]["curriculum/unseen"] == 2 and steps[-1]["curriculum/unseen"] == 0


def test_sft_takes_conversational_pairs_and_prints_its_loss_as_it_goes(tmp_path, capsys):
    rows = [{"prompt": [{"role": "user", "content": "1+1="}],
             "completion": [{"role": "assistant", "content": ">2"}]},
            {"messages": [{"role": "user", "content": "2+1="}, {"role": "assistant", "content": ">3"}]},
            {"prompt": "3+1=", "completion": ">4"}]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["sft", "--data", str(data), "--out", str(tmp_path / "s"), "--steps", "40",
                 "--batch-size", "2", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("sft step")] == \
        [f"sft step {s}/40" for s in range(2, 41, 2)]
    from rlvr.cli.main import build_parser
    sft_help = build_parser()._subparsers._group_actions[0].choices["sft"].format_help()
    assert "(default: 300)" in sft_help and "(default: 64)" in sft_help


def test_prompts_the_tiny_vocabulary_cannot_read_are_warned_about(tmp_path, capsys):
    data = tmp_path / "words.jsonl"
    data.write_text(json.dumps({"prompt": "What is 2+2?", "answer": "4"}) + "\n"
                    + json.dumps({"prompt": "2+2=", "answer": "4"}) + "\n")
    args = _write_run(tmp_path, "data.verifier=math", "grpo.steps=1")
    args[args.index(f"data.train_path={tmp_path / 'train.jsonl'}")] = f"data.train_path={data}"
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "warning: 1 of 2 prompts hold text this tokenizer does not know" in out
    assert "'W'" in out and "'?'" in out and "'2'" not in out
