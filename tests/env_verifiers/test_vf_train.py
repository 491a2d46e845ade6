"""`rlvr train` on a verifiers environment named in the config (`data.task: verifiers:SPEC`).

Real parts: the CLI in a subprocess, verifiers' SingleTurnEnv / MultiTurnEnv / Rubric from an
environment module written into tmp_path, the tiny ASCII Llama built in memory. No network."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

vf = pytest.importorskip("verifiers", minversion="0.3.1")
if not hasattr(vf, "SingleTurnEnv"):      # verifiers 0.4 dropped the classic API
    pytest.skip("verifiers without the classic API (vf.SingleTurnEnv)", allow_module_level=True)

ENV_MODULE = '''
import verifiers as vf
from datasets import Dataset


def vowels(completion, **kwargs) -> float:
    text = completion[-1]["content"] if completion else ""
    return sum(ch in "aeiou" for ch in text) / max(1, len(text))


def has_answer(completion, answer, **kwargs) -> float:
    return float(any(answer in (m["content"] or "") for m in completion if m["role"] == "assistant"))


def rubric():
    return vf.Rubric(funcs=[vowels, has_answer], weights=[2.0, 0.5])


def rows(letters):
    return Dataset.from_list([{"question": f"say {c}", "answer": c} for c in letters])


class MoreEnv(vf.MultiTurnEnv):
    async def env_response(self, messages, state, **kwargs):
        return [vf.UserMessage(content="more")]

    @vf.stop
    async def three_turns(self, state) -> bool:
        return len(state["trajectory"]) >= 3


def single(letters="aeioubcdfg"):
    return vf.SingleTurnEnv(dataset=rows(letters), rubric=rubric())


def multi(letters="aeioubcdfg"):
    return MoreEnv(dataset=rows(letters), eval_dataset=rows("xyz"), rubric=rubric(), max_turns=5)


def not_an_env():
    return {"dataset": []}
'''


@pytest.fixture()
def env_file(tmp_path) -> Path:
    path = tmp_path / "my_envs.py"
    path.write_text(ENV_MODULE)
    return path


def _config(tmp_path: Path, run_dir: Path, task: str, steps: int = 3, prompts: int = 2,
            **options) -> Path:
    cfg = tmp_path / f"{run_dir.name}.yaml"
    cfg.write_text(
        "seed: 3\n"
        f"run: {{dir: {run_dir}, save_every: 2, eval_every: 2, progress: false, threads: 1,"
        " report: false, transcripts_every: 1}\n"
        "model: {path: 'builtin:tiny-llama-ascii'}\n"
        f"data: {{task: '{task}', task_options: {json.dumps(options)}, heldout_size: 4}}\n"
        "rollout: {max_new_tokens: 12}\n"
        f"grpo: {{steps: {steps}, group_size: 4, prompts_per_step: {prompts}, lr: 1.0e-3}}\n")
    return cfg


def _train(cfg: Path, *overrides: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlvr.cli", "train", str(cfg), *overrides],
                          capture_output=True, text=True, timeout=600, cwd=cwd)


def _lines(run_dir: Path, name: str = "metrics.jsonl") -> list[str]:
    return (run_dir / name).read_text().splitlines()


def _steps(run_dir: Path) -> list[dict]:
    return [r for r in map(json.loads, _lines(run_dir)) if "reward/mean" in r]


def _check_turns(run_dir: Path, steps: list[dict], turns: int) -> None:
    """Every episode plays the environment's `turns` turns, except one verifiers aborted (an empty
    reply, flag vf_error), which stops at the turn that failed; `episodes/turns_mean` is their exact
    mean. Which episodes sample an empty reply is fixed by the seed (the server's draws do not depend
    on request arrival), so every number here is the same on every run."""
    import pyarrow.parquet as pq

    rows = pq.read_table(run_dir / "completions.parquet").to_pylist()
    for r in steps:
        mine = [x for x in rows if x["step"] == r["step"]]
        played = [x["completion"].count("\nuser: more\nassistant:") + 1 for x in mine]
        assert mine and all(n == turns for n, x in zip(played, mine) if "vf_error" not in x["flags"])
        assert all(n <= turns for n in played)
        assert r["episodes/turns_mean"] == sum(played) / len(played)


def _check_rubric_metrics(steps: list[dict]) -> None:
    for r in steps:
        # the rubric's reward is the verifier's: 2 * vowels + 0.5 * has_answer, per function too
        assert r["reward/verifiers/share"] == 1.0
        assert r["reward/verifiers/mean"] == pytest.approx(r["reward/mean"])
        want = 2.0 * r["rewards/vowels/mean"] + 0.5 * r["rewards/has_answer/mean"]
        assert r["reward/mean"] == pytest.approx(want, abs=1e-9)
        assert "rewards/num_turns/mean" not in r          # a weight-0 monitor, not a reward term
    assert any(r["reward/mean"] > 0 for r in steps)
    assert any(r.get("grad_norm", 0) > 0 for r in steps)
    for r in steps:                  # on-policy: the engine's behaviour log-probs are the trainer's
        assert r["mismatch/kl"] < 1e-6


def test_single_turn_env_trains_from_a_module_name(tmp_path, env_file):
    run_dir = tmp_path / "single"
    # module:function, importable from the working directory (as `python -m` puts it on sys.path)
    proc = _train(_config(tmp_path, run_dir, "verifiers:my_envs:single"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    steps = _steps(run_dir)
    assert [r["step"] for r in steps] == [0, 1, 2]
    _check_rubric_metrics(steps)
    assert all(r["episodes/turns_mean"] == 1.0 for r in steps)   # one turn, whatever the reply
    records = [json.loads(x) for x in _lines(run_dir)]
    assert [r["step"] for r in records if "eval/accuracy" in r] == [2, 3]
    # no eval dataset: the held-out set is 10 // 5 = 2 rows of the dataset, never trained on
    assert json.loads((run_dir / "summary.json").read_text())["heldout_size"] == 2


def test_curriculum_and_dynamic_sampling_see_the_rubric(tmp_path, env_file):
    run_dir = tmp_path / "curriculum"
    proc = _train(_config(tmp_path, run_dir, f"verifiers:{env_file}:single"),
                  "curriculum.enabled=true", "dynamic_sampling.enabled=true")
    assert proc.returncode == 0, proc.stderr
    rates = [json.loads(x) for x in _lines(run_dir, "pass_rates.jsonl")]
    # pass rates per training problem: reward > 0 counts (vowels), from the rubric, kept on each completion
    assert rates and all(r["id"].startswith("vf/") for r in rates)
    assert sum(r["completions"] for r in rates) >= 3 * 2 * 4 and any(r["correct"] > 0 for r in rates)
    assert all("dynamic/informative_groups" in r for r in _steps(run_dir))


def test_heldout_split_without_an_eval_dataset(tmp_path, env_file):
    """Seeded, disjoint from training, rows // 5 rows (capped by heldout_size)."""
    from rlvr.agents.vftask import load_environment, split_problems

    env = load_environment(f"verifiers:{env_file}:single", {})
    train, held = split_problems(env, 500, seed=3)
    ids = lambda ps: [p.id for p in ps]   # noqa: E731
    assert len(held) == 2 and len(train) == 8
    assert sorted(ids(train + held)) == sorted(f"vf/{i}" for i in range(10))
    assert (ids(train), ids(held)) == tuple(map(ids, split_problems(env, 500, seed=3)))
    assert {tuple(ids(split_problems(env, 500, seed=s)[1])) for s in range(6)} != {tuple(ids(held))}
    assert [len(ps) for ps in split_problems(env, 1, seed=3)] == [9, 1]     # heldout_size caps it


def test_multi_turn_env_trains_from_a_file_path(tmp_path, env_file):
    run_dir = tmp_path / "multi"
    proc = _train(_config(tmp_path, run_dir, f"verifiers:{env_file}:multi", letters="aeiou"),
                  "run.log_completions=1")
    assert proc.returncode == 0, proc.stderr
    steps = _steps(run_dir)
    assert [r["step"] for r in steps] == [0, 1, 2]
    _check_rubric_metrics(steps)
    _check_turns(run_dir, steps, turns=3)         # the environment's own stop: three turns each
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["heldout_size"] == 3           # the environment's eval dataset ("xyz")


def test_resume_from_a_checkpoint_repeats_the_metric_lines(tmp_path, env_file):
    """A run stopped after step 3 (checkpoint at 2) is resumed: the lines up to the checkpoint are
    kept as written, the steps after it are redone once each on the same problems, with the same
    samples (the server's draws do not depend on the order requests arrive in)."""
    ref = tmp_path / "ref"
    # one prompt per step: the transcript's problem is the step's draw
    cfg = _config(tmp_path, ref, f"verifiers:{env_file}:multi", steps=4, prompts=1)
    assert _train(cfg).returncode == 0
    cut = tmp_path / "cut"
    shutil.copytree(ref, cut)
    for leftover in ("final", "summary.json", "checkpoints/step-000004"):
        shutil.rmtree(cut / leftover) if (cut / leftover).is_dir() else (cut / leftover).unlink()
    resumed = _train(cfg, f"run.dir={cut}")
    assert resumed.returncode == 0, resumed.stderr
    lines, ref_lines = _lines(cut), _lines(ref)
    kept = [x for x in ref_lines if json.loads(x)["step"] < 2]
    assert lines[:len(kept)] == kept                      # repeated byte for byte
    assert [r["step"] for r in _steps(cut)] == [0, 1, 2, 3]
    # the redone steps drew the same problems (the sampler's state came back from the checkpoint)
    drawn = lambda d: [(t["step"], t["problem_id"]) for t in map(json.loads, _lines(d, "transcripts.jsonl"))]  # noqa: E731
    assert drawn(cut) == drawn(ref)
    # and sampled what the uninterrupted run sampled: every line equal, wall-clock fields aside
    clock = ("time", "timing/", "tokens_per_s")
    det = lambda d: [{k: v for k, v in json.loads(x).items() if not k.startswith(clock)} for x in _lines(d)]  # noqa: E731
    assert det(cut) == det(ref)


def test_the_server_is_closed_when_the_run_ends(tmp_path, env_file, monkeypatch):
    from rlvr import config as config_mod
    from rlvr.agents import vf as vf_mod
    from rlvr.train import train

    servers = []
    real_init = vf_mod.OpenAIServer.__init__

    def spy(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        servers.append(self.base_url)
    monkeypatch.setattr(vf_mod.OpenAIServer, "__init__", spy)
    cfg = config_mod.load(_config(tmp_path, tmp_path / "closed", f"verifiers:{env_file}:single",
                                  steps=1))
    train(cfg)
    assert len(servers) == 1
    port = int(servers[0].split(":")[-1].split("/")[0])
    with pytest.raises(ConnectionRefusedError):      # nothing listens on the server's port now
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


@pytest.mark.parametrize("task, options, message", [
    ("verifiers:no_such_module_xyz:load", {},
     "data.task: cannot load 'no_such_module_xyz:load': ModuleNotFoundError"),
    ("verifiers:{env}:missing", {}, "data.task: cannot load '{env}:missing': AttributeError"),
    ("verifiers:{env}:not_an_env", {}, "data.task: '{env}:not_an_env' returned dict, not a verifiers"),
    ("verifiers:{env}", {}, "invalid value 'verifiers:{env}' for data.task"),
    ("verifiers:{dir}/nope.py:single", {}, "data.task: cannot load '{dir}/nope.py:single': FileNotFound"),
    ("verifiers:{env}:single", {"colour": "red"}, "data.task_options: {env}:single(**{{'colour': "),
])
def test_bad_names_exit_2_before_writing(tmp_path, env_file, task, options, message):
    run_dir = tmp_path / "bad"
    task, message = (t.format(env=env_file, dir=tmp_path) for t in (task, message))
    proc = _train(_config(tmp_path, run_dir, task, **options))
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not run_dir.exists()


@pytest.mark.parametrize("override, env, message", [
    ("rollout.max_staleness=1", {}, "rollout.max_staleness: data.task=verifiers:"),
    ("model.lora.r=4", {}, "model.lora.r: data.task=verifiers:"),
    ("seed=3", {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}, "torchrun: data.task=verifiers:"),
])
def test_untested_combinations_exit_2_before_writing(tmp_path, env_file, override, env, message):
    import os

    run_dir = tmp_path / "bad"
    proc = subprocess.run([sys.executable, "-m", "rlvr.cli", "train", str(_config(
        tmp_path, run_dir, f"verifiers:{env_file}:single")), override], capture_output=True,
        text=True, timeout=600, env={**os.environ, **env})
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not run_dir.exists()


@pytest.mark.parametrize("engine", ["vllm", "ray"])
def test_other_engines_are_refused(engine):
    # the CLI stops earlier when the package is missing; this is the refusal when it is installed
    from rlvr import config as config_mod
    from rlvr.errors import ConfigError
    from rlvr.config.checks import check_combinations
    from rlvr.rollout.engines import ENGINES

    cfg = config_mod.from_dict({"data": {"task": "verifiers:m:f"}})
    with pytest.raises(ConfigError, match=r"rollout.engine: data.task=verifiers:\.\.\. runs episodes"):
        check_combinations(cfg, engine, False, ENGINES)
