"""The engine table (`rlvr.rollout.engines`) is the one place engines are named and described:
no engine name appears as a string anywhere else in the package, and the launch and combination
checks read a registered engine's row exactly as they read a built-in one's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rlvr
from rlvr import config
from rlvr.config.checks import check_launch
from rlvr.errors import ConfigError
from rlvr.rollout import engines

ROOT = Path(rlvr.__file__).parent
BUILT_IN = ("hf", "vllm", "ray", "vllm_server")
# the table, and the engines' own modules (an engine may name itself)
OWN = {"rollout/engines.py", "rollout/hf.py", "rollout/ray.py"}
# the schema's default value (config cannot import the table, a layer above it)
DEFAULT = ("config/schema.py", "hf")


def test_no_engine_name_is_a_string_outside_the_table_and_the_engines_modules():
    assert set(BUILT_IN) <= set(engines.ENGINES)
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in OWN or rel.startswith("rollout/vllm/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Constant) and node.value in BUILT_IN and (rel, node.value) != DEFAULT:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert found == [], "engine names outside the engine table:\n" + "\n".join(found)


@pytest.fixture
def toy():
    engines.register_engine("toy", lambda cfg, model, tok, device: None)
    yield engines.ENGINES["toy"]
    del engines.ENGINES["toy"]


def test_a_registered_engine_claims_nothing_until_it_says_so(toy):
    cfg = config.from_dict({}, ["rollout.engine=toy"])
    check_launch(cfg, 1, engines.capabilities())
    with pytest.raises(ConfigError, match=r"rollout.engine='toy' under torchrun is not supported.*"
                                          r"use rollout.engine=hf or vllm_server"):
        check_launch(cfg, 2, engines.capabilities())
    for override, key in (("model.lora.r=4", "model.lora.r"), ("rollout.max_staleness=1", "rollout.max_staleness")):
        with pytest.raises(ConfigError, match=rf"{key}: needs rollout.engine=hf or vllm_server \(the toy"):
            check_launch(config.from_dict({}, ["rollout.engine=toy", override]), 1, engines.capabilities())
    agentic = config.from_dict({}, ["rollout.engine=toy", "data.task=agentic"])
    with pytest.raises(ConfigError, match="rollout.engine: data.task=agentic runs episodes only with rollout.engine"):
        check_launch(agentic, 1, engines.capabilities())

    engines.register_engine("toy", toy.build, ranks="shard", ahead=True, episodes=("agentic",))
    check_launch(cfg, 2, engines.capabilities())
    check_launch(config.from_dict({}, ["rollout.engine=toy", "rollout.max_staleness=1"]), 1, engines.capabilities())
    check_launch(agentic, 1, engines.capabilities())
    with pytest.raises(ValueError, match="ranks must be"):
        engines.register_engine("toy", toy.build, ranks="all")


def test_the_engines_own_packages_and_checks_come_from_its_row(toy, monkeypatch):
    from rlvr.training.extras import check_extras

    engines.register_engine("toy", toy.build, extras=(engines.Package("toyx", "toy_pkg", "rollout.engine"),),
                            check=lambda cfg: (_ for _ in ()).throw(ConfigError("toy: no device")))
    cfg = config.from_dict({}, ["rollout.engine=toy"])
    with pytest.raises(ConfigError, match=r"rollout.engine='toy' needs the toy_pkg package.*'\.\[toyx\]'"):
        check_extras(cfg, found=lambda module: module != "toy_pkg")
    with pytest.raises(ConfigError, match="toy: no device"):
        engines.run_check(cfg)


def test_register_engine_and_task_are_public():
    from rlvr.tasks.base import Task, register_task

    assert rlvr.register_engine is engines.register_engine
    assert rlvr.register_task is register_task and rlvr.Task is Task


def test_every_engine_only_rollout_key_is_claimed_by_the_engines_that_read_it():
    """The table's `keys` are RolloutConfig fields only some engines read (every `vllm_*` among
    them); they are read only in the engines' own modules and the table."""
    import dataclasses

    from rlvr.config.schema import RolloutConfig

    common = {"engine", "temperature", "top_p", "top_k", "max_staleness", "max_new_tokens"}
    claimed = {k for row in engines.ENGINES.values() for k in row.keys}
    fields = {f.name for f in dataclasses.fields(RolloutConfig)}
    assert claimed <= fields and not claimed & common and {f for f in fields if f.startswith("vllm_")} <= claimed
    readers: dict[str, set[str]] = {k: set() for k in claimed}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        for key in claimed:
            if f"rollout.{key}" in text and rel != "config/schema.py":
                readers[key].add(rel)
    outside = {k: sorted(r for r in v if not (r in OWN or r.startswith("rollout/vllm/"))) for k, v in readers.items()}
    assert all(not v for v in outside.values()), outside
