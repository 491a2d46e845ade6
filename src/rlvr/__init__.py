"""rlvr: reinforcement learning from verifiable rewards (GRPO and its variants) for reasoning LMs.

The public surface is `__all__`: the config (`Config`, `load`), the data that flows between stages
(`Problem`, `Completion`, `Group`, `Score`), the user-facing errors, the verifier protocol and
registry, the rollout engine protocol with its sampling parameters and the engine table
(`register_engine`), and the task protocol and registry (`Task`, `register_task`). Each name is imported on
first use, so `import rlvr` loads nothing else. The training entry point is `rlvr.train.train`
(the submodule `rlvr.train` owns the name, so the package cannot re-export the function under it);
the `rlvr` command is the other way in.

Everything not listed here (`rlvr.training`, `rlvr.rollout.hf`, `rlvr.testing`, any `_name`) is
internal: it may change between versions without notice. Layers and what is public:
docs/design/layers.md.
"""

__version__ = "0.1.0"

# name -> the module that defines it; resolved by `__getattr__` below on first access.
_SURFACE = {
    "Config": "rlvr.config", "load": "rlvr.config",
    "Problem": "rlvr.types", "Completion": "rlvr.types", "Group": "rlvr.types", "Score": "rlvr.types",
    "UserError": "rlvr.errors", "ConfigError": "rlvr.errors", "DataError": "rlvr.errors",
    "Verifier": "rlvr.verifiers.base", "get_verifier": "rlvr.verifiers.base",
    "register_verifier": "rlvr.verifiers.base", "verifier_names": "rlvr.verifiers.base",
    "RolloutEngine": "rlvr.rollout.base", "SamplingParams": "rlvr.rollout.base",
    "register_engine": "rlvr.rollout.engines",
    "Task": "rlvr.tasks.base", "register_task": "rlvr.tasks.base",
}

__all__ = sorted(_SURFACE) + ["__version__"]

TYPE_CHECKING = False   # type checkers treat this name as true; `typing` itself is not imported
if TYPE_CHECKING:   # F401: these names are used through `__all__`, which ruff cannot evaluate
    from rlvr.config import Config, load  # noqa: F401
    from rlvr.errors import ConfigError, DataError, UserError  # noqa: F401
    from rlvr.rollout.base import RolloutEngine, SamplingParams  # noqa: F401
    from rlvr.rollout.engines import register_engine  # noqa: F401
    from rlvr.tasks.base import Task, register_task  # noqa: F401
    from rlvr.types import Completion, Group, Problem, Score  # noqa: F401
    from rlvr.verifiers.base import Verifier, get_verifier, register_verifier, verifier_names  # noqa: F401


def __getattr__(name: str):
    module = _SURFACE.get(name)
    if module is None:
        raise AttributeError(f"module 'rlvr' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value     # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SURFACE))
