"""Whole contracts: every engine and engine wrapper has every `RolloutEngine` member (checked when
the run is built, with a clear error), `continue_ids` is required where a task plays episodes, one
`PromptEncoder` encodes prompts, and `data.task` names resolve through the lazy task registry."""

from __future__ import annotations

import types

import pytest

from rlvr import config
from rlvr.agents.engine import EpisodeEngine
from rlvr.agents.episode import Budget
from rlvr.agents.runtime import EpisodeTask
from rlvr.agents.vftask import VerifiersEngine, VerifiersTask
from rlvr.errors import ConfigError
from rlvr.models.policy import encode_prompt, load_policy
from rlvr.rollout.base import PromptEncoder, RolloutEngine, check_engine_protocol, missing_members
from rlvr.rollout.hf import HFEngine
from rlvr.rollout.ranks import ShardedEngine
from rlvr.tasks import base as tasks
from rlvr.tasks.arithmetic import ANSWER_MARK, ArithmeticTask, make_problem
from rlvr.tasks.rgym import ReasoningGymTask
from rlvr.training.setup import build_engine, build_problems
from rlvr.types import Problem


@pytest.fixture(scope="module")
def tiny():
    return load_policy("builtin:tiny-llama", seed=0)


def test_every_engine_and_wrapper_is_whole(tiny):
    model, tok = tiny
    hf = HFEngine(model, tok)
    wrappers = [hf, EpisodeEngine(hf, tok, lambda p: None, Budget()),
                VerifiersEngine(object(), hf, lambda: None),
                ShardedEngine(hf, types.SimpleNamespace(rank=0, world=1))]
    for engine in wrappers:
        assert missing_members(engine, RolloutEngine) == [], type(engine).__name__
        assert engine.prompts is hf.prompts   # the prompt facts, passed on whole
        assert engine.sync_metrics == {} and engine.model is model
    check_engine_protocol(hf, continues=True)


def test_an_engine_that_lacks_a_member_fails_at_build_time():
    class Partial:
        prompts, version, model, sync_metrics = None, 0, None, {}

        def generate(self, problems, n, params, seed):
            return []

        def load_weights(self, policy, version=0):
            return None

    with pytest.raises(TypeError, match="lacks close"):
        check_engine_protocol(Partial())
    Partial.close = lambda self: None
    check_engine_protocol(Partial())
    with pytest.raises(TypeError, match="TokenContinuer.*lacks continue_ids$"):
        check_engine_protocol(Partial(), continues=True)


def test_build_engine_checks_continue_ids_for_episode_tasks(tiny, monkeypatch):
    model, tok = tiny
    cfg = config.from_dict({}, [])

    class Episodes:
        plays_episodes = True

        def wrap_engine(self, engine, tokenizer):
            return engine

    import rlvr.rollout.engines as engines
    monkeypatch.setattr(engines, "build", lambda *a: ShardedEngine(
        HFEngine(model, tok), types.SimpleNamespace(rank=0, world=1)))
    with pytest.raises(TypeError, match="ShardedEngine .*lacks continue_ids"):
        build_engine(cfg, model, tok, task=Episodes())
    Episodes.plays_episodes = False
    assert isinstance(build_engine(cfg, model, tok, task=Episodes()), ShardedEngine)


def test_prompt_encoder_is_encode_prompt_with_the_engines_choices(tiny):
    model, tok = tiny
    p = Problem("a", "12+3")
    for chat, text in [(True, False), (False, False), (True, True)]:
        enc = PromptEncoder.for_model(model, tok, chat, text)
        assert enc.encode(p) == encode_prompt(tok, p, chat, text)
    assert enc.pad_id == HFEngine(model, tok).pad_id
    assert PromptEncoder(tok, vocab_size=len(tok) + 64).vocab_limit == len(tok)
    assert PromptEncoder(tok, vocab_size=len(tok)).vocab_limit is None


def test_every_task_class_has_every_task_member():
    for cls in (ArithmeticTask, ReasoningGymTask, EpisodeTask, VerifiersTask):
        assert missing_members(cls, tasks.Task) == [], cls.__name__
    assert not ArithmeticTask.plays_episodes and EpisodeTask.plays_episodes


def test_task_names_resolve_through_the_registry():
    cfg = config.from_dict({}, ["data.task=arithmetic", "data.difficulty=2"])
    task = tasks.build_task(cfg)
    assert isinstance(task, ArithmeticTask) and task.digits == 2
    verifiers, train, heldout, built = build_problems(cfg)
    assert set(verifiers) == {"arithmetic"} and train == [] and built == task
    assert isinstance(tasks.build_task(config.from_dict({}, ["data.task=agentic"])), EpisodeTask)
    for bad in ("chess", "reasoning_gym", "arithmetic:x"):
        with pytest.raises(ConfigError, match="for data.task; allowed: arithmetic, agentic"):
            tasks.build_task(config.from_dict({}, [f"data.task={bad}"]))


def test_registered_task_families_receive_the_whole_name(monkeypatch):
    monkeypatch.setattr(tasks, "_FAMILIES", dict(tasks._FAMILIES))
    seen = []
    tasks.register_task("mine", lambda cfg: seen.append(cfg.data.task) or ArithmeticTask(), family=True)
    tasks.build_task(config.from_dict({}, ["data.task=mine:a:b"]))
    assert seen == ["mine:a:b"]


def test_arithmetic_verifier_options_are_still_checked():
    with pytest.raises(ConfigError, match="data.verifier_options: unknown verifier 'nope'"):
        ArithmeticTask(verifier_options={"nope": {}}).verifiers()
    assert ArithmeticTask().verifiers()["arithmetic"].score_batch(
        [ANSWER_MARK + "3"], [make_problem(1, 2, "+")])[0].reward == 1.0
