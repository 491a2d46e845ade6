"""The parts of a run, each built and tested without a `Run`; the device each torchrun rank gets."""

from __future__ import annotations

import types

import torch
import torch.distributed as dist
import pytest

from rlvr import config
from rlvr.models.device import Device
from rlvr.training import checkpoint, resume
from rlvr.training.runlog import RunLog
from rlvr.tasks.base import build_verifiers
from rlvr.training.setup import build_sampler
from rlvr.training.source import RolloutSource
from rlvr.training.state import TrainingState
from rlvr.types import Completion, Group, Problem


def _cfg(*overrides: str):
    return config.from_dict({}, ["run.progress=false", "grpo.steps=3", *overrides])


# ---- Device: the one device authority --------------------------------------------------------


def test_rank_1_of_2_computes_on_its_own_gpu(monkeypatch):
    """Under torchrun with NCCL the process group is joined first, and its LOCAL_RANK picks the
    device, not `torch.cuda.current_device()` (0 on every rank until someone sets it)."""
    from rlvr.training.run import place

    for key, value in {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}.items():
        monkeypatch.setenv(key, value)
    set_to: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_device", set_to.append)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend: None)
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    monkeypatch.setattr(dist, "get_backend", lambda: "nccl")

    assert Device.resolve("auto").torch == torch.device("cuda", 0)   # what a rank got before
    dp, device = place(_cfg("run.device=auto"))
    assert set_to == [1] and dp.local_rank == 1 and dp.rank == 1
    assert device.torch == torch.device("cuda", 1)
    assert dp.device == device.torch                 # DDP's device_ids and the policy agree
    assert place(_cfg("run.device=cuda"))[1].torch == torch.device("cuda", 1)
    assert place(_cfg("run.device=cuda:0"))[1].torch == torch.device("cuda", 0)   # explicit: as given


def test_a_local_rank_beyond_the_visible_gpus_is_a_config_error(monkeypatch):
    from types import SimpleNamespace

    from rlvr.errors import ConfigError
    from rlvr.training.setup import build_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ConfigError, match="LOCAL_RANK 1"):
        build_device(_cfg("run.device=auto"), SimpleNamespace(local_rank=1))


def test_one_process_keeps_its_device():
    assert Device.resolve("cpu", local_rank=3).torch == torch.device("cpu")


# ---- TrainingState ---------------------------------------------------------------------------


def _state(seed: int = 0) -> TrainingState:
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 2)
    return TrainingState(_cfg("grpo.warmup_steps=2"), model, model, None, Device.cpu())


def test_training_state_saves_and_loads_optimizer_and_schedule_whole():
    state = _state()
    state.policy(torch.ones(3, 4)).sum().backward()
    state.optimizer.step()
    state.scheduler.step()
    saved = state.state_dict()
    assert set(saved) == {"optimizer", "scheduler"}

    fresh = _state(seed=1)
    fresh.load_state_dict(saved)
    assert fresh.scheduler.last_epoch == 1
    assert fresh.optimizer.param_groups[0]["lr"] == state.optimizer.param_groups[0]["lr"]
    for a, b in zip(state.optimizer.state.values(), fresh.optimizer.state.values()):
        assert torch.equal(a["exp_avg"], b["exp_avg"]) and torch.equal(a["exp_avg_sq"], b["exp_avg_sq"])


def test_advantages_are_the_configured_function_of_the_rewards():
    adv = _state().advantages([Group(Problem(id="p", prompt=""), [], [_completion("1", 1.0),
                                                                      _completion("0", 0.0)])])
    assert adv.shape == (1, 2) and adv[0, 0] > 0 > adv[0, 1]


# ---- RolloutSource ---------------------------------------------------------------------------


def _completion(text: str, reward: float | None = None) -> Completion:
    from rlvr.types import Score

    score = None if reward is None else Score(reward, reward > 0)
    return Completion(text, [1], [0.0], "stop", score=score)


class _Engine:
    """A rollout engine that answers every problem with its reference, then ">0"."""

    version, model = 0, None
    prompts = types.SimpleNamespace(pad_id=0, vocab_limit=None)

    def __init__(self):
        self.seeds, self.loaded = [], []
        self.sync_metrics: dict[str, float] = {}

    def generate(self, problems, n, params, seed):
        self.seeds.append(seed)
        return [Group(p, [1], [_completion(f">{p.reference}")] + [_completion(">0")] * (n - 1))
                for p in problems]

    def load_weights(self, policy, version=0):
        self.loaded.append(version)
        self.version = version
        self.sync_metrics = {"sync/calls": float(len(self.loaded))}

    def close(self):
        self.loaded.append("closed")


def _source(*overrides: str) -> RolloutSource:
    cfg = _cfg("grpo.group_size=2", "grpo.prompts_per_step=2", *overrides)
    problems = [Problem(id=f"p{i}", prompt=f"{i}+1=", reference=str(i + 1), verifier="arithmetic")
                for i in range(4)]
    return RolloutSource(cfg, _Engine(), build_verifiers({"arithmetic"}), build_sampler(cfg, None, problems))


def test_rollout_source_generates_verifies_and_returns_the_steps_metrics():
    source = _source()
    groups, metrics = source.take(0)
    assert [len(g.completions) for g in groups] == [2, 2]
    assert [c.score.reward for c in groups[0].completions] == [1.0, 0.0]
    assert list(metrics)[:3] == ["timing/generate", "timing/verify", "dynamic/generated_completions"]
    assert metrics["dynamic/generated_completions"] == 4.0
    assert source.sync(None, 1) == {"sync/calls": 1.0}      # logged with the step
    assert source.engine.loaded == [1]
    source.close()
    assert source.engine.loaded == [1, "closed"]


def test_the_fake_engine_is_a_whole_rollout_engine():
    from rlvr.rollout.base import check_engine_protocol

    check_engine_protocol(_Engine())


def test_rollout_source_state_resumes_the_sampler_where_it_was():
    first = _source()
    first.take(0)
    assert first.observe(first.take(1)[0]) == {}            # no curriculum: nothing to report
    again = _source()
    again.load_state_dict(first.state_dict())
    assert set(first.state_dict()) == {"sampler", "rollouts"}
    assert [g.problem.id for g in again.take(2)[0]] == [g.problem.id for g in first.take(2)[0]]
    assert again.engine.seeds == first.engine.seeds[-1:]     # seeds come from (seed, step)


def test_rollouts_ahead_run_on_the_engine_the_source_engine_shares():
    copies = []

    class Sharing(_Engine):
        def share(self):
            copies.append(_Engine())
            return copies[-1]

    cfg = _cfg("grpo.group_size=2", "grpo.prompts_per_step=2", "rollout.max_staleness=1")
    problems = [Problem(id=f"p{i}", prompt="", reference="1", verifier="arithmetic") for i in range(4)]
    source = RolloutSource(cfg, Sharing(), build_verifiers({"arithmetic"}), build_sampler(cfg, None, problems))
    source.take(0)
    source.ahead(0, policy="weights after step 0")
    source.wait()
    assert len(copies) == 1 and copies[0].loaded == [0] and source.engine.seeds != []
    groups, metrics = source.take(1)
    assert len(groups) == 2 and len(source.engine.seeds) == 1      # step 1 came from the buffer
    assert metrics["async/staleness"] == 1.0 and "timing/generate" in metrics
    source.ahead(2, policy=None)                                    # step 3 is past the last step
    assert source.rollouts.buffer == {}


# ---- RunLog ----------------------------------------------------------------------------------


class _Out:
    t0 = 0.0

    def __init__(self):
        self.records, self.truncated = [], None

    def write(self, record):
        self.records.append(record)

    def write_transcripts(self, step, groups, advantages):
        self.records.append({"transcripts": step})

    def offsets(self):
        return {"metrics.jsonl": len(self.records)}

    def truncate_to(self, offsets):
        self.truncated = offsets


def test_run_log_writes_one_line_per_step_in_key_order_and_stops_on_bad_updates():
    out = _Out()
    log = RunLog(_cfg("run.max_bad_steps=2", "run.transcripts_every=0"), out, Device.cpu())
    groups = [Group(Problem(id="p", prompt=""), [1], [_completion("1", 1.0), _completion("0", 0.0)])]
    adv = torch.tensor([[1.0, -1.0]])
    steps = log.steps(0)
    assert next(steps) == 0
    with log.timed("update"):
        pass
    record = log.step(0, groups, adv, {"loss": 0.5}, {"timing/generate": 0.1, "x": 1.0})
    keys = list(record)
    assert keys[:2] == ["step", "time"]
    assert keys.index("loss") < keys.index("timing/generate") < keys.index("timing/update") < keys.index("x")
    assert out.records == [record]
    assert next(steps) == 1 and log.timings == {}
    log.step(1, groups, adv, {"loss": float("nan")})
    assert log.state_dict()["bad_steps"] == 1
    with pytest.raises(Exception, match="2 updates in a row"):
        log.step(2, groups, adv, {"loss": float("nan")})


def test_run_log_state_truncates_the_files_and_restores_the_counters():
    log = RunLog(_cfg(), _Out(), Device.cpu())
    log.bad_steps = 3
    log.crashes.reported = {"boom"}
    saved = log.state_dict()
    assert set(saved) == {"doctor", "metrics_offsets", "bad_steps", "reward_crashes"}
    other = RunLog(_cfg(), _Out(), Device.cpu())
    other.load_state_dict(saved)
    assert other.bad_steps == 3 and other.out.truncated == saved["metrics_offsets"]
    assert other.crashes.reported == {"boom"}


# ---- Checkpointer and the save/resume loop ---------------------------------------------------


class _Saves:
    def save_pretrained(self, path, state_dict=None):
        (path / "model.safetensors").write_bytes(b"")


def test_checkpointer_keeps_the_best_and_the_newest_and_resumes_from_the_latest(tmp_path):
    ckpts = checkpoint.Checkpointer(tmp_path, keep_last=1)
    assert ckpts.resume_point("auto") is None
    best = ckpts.save(1, 0.9, {"step": 1}, _Saves(), _Saves(), None, alarm=None)
    ckpts.save(2, 0.1, {"step": 2}, _Saves(), _Saves(), None, alarm=None)
    last = ckpts.save(3, None, {"step": 3}, _Saves(), _Saves(), None, alarm=None)
    assert checkpoint.complete_checkpoints(tmp_path / "checkpoints") == [best, last]
    assert ckpts.resume_point("auto") == last
    with pytest.raises(Exception, match="already holds checkpoints"):
        ckpts.resume_point("never")
    other = checkpoint.Checkpointer(tmp_path, keep_last=1)
    other.load_state_dict(ckpts.state_dict())
    assert other.best == (0.9, best)


def test_a_failed_write_raises_an_alarm_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    ckpts, alarms = checkpoint.Checkpointer(tmp_path, keep_last=2), []
    first = ckpts.save(1, None, {"step": 1}, _Saves(), _Saves(), None, alarm=alarms.append)

    def full_disk(*args, **kwargs):
        raise OSError("no space left")

    monkeypatch.setattr(checkpoint, "save", full_disk)
    ckpts.save(2, None, {"step": 2}, _Saves(), _Saves(), None, alarm=alarms.append)
    assert [a["name"] for a in alarms] == ["checkpoint_failed"]
    assert checkpoint.latest(tmp_path / "checkpoints") == first


class _Part:
    def __init__(self, key, value, seen):
        self.key, self.value, self.seen = key, value, seen

    def state_dict(self):
        return {self.key: self.value}

    def load_state_dict(self, state):
        self.seen.append((self.key, state[self.key]))


def test_save_and_resume_are_one_loop_over_named_parts():
    seen: list = []
    parts = {"a": _Part("x", 1, seen), "b": _Part("y", 2, seen)}
    state = resume.trainer_state(parts, done=7)
    assert state == {"step": 7, "x": 1, "y": 2}
    assert resume.restore(parts, state) == 7 and seen == [("x", 1), ("y", 2)]
    with pytest.raises(ValueError, match="'c' writes keys another part owns"):
        resume.trainer_state({**parts, "c": _Part("x", 3, seen)}, done=7)
