"""Typed, frozen run configuration: YAML presets plus dotted command-line overrides.

`schema` declares the sections (each value rule beside its field), `loader` reads presets and
overrides and checks every key and value, `checks` holds every check that spans fields (pure
functions of the config), and `commands` the sections of `rlvr sft` and `rlvr eval`. This module
re-exports their public names, so `from rlvr.config import Config, load` and `config.load(...)`
work as before the split. Imports no torch.
"""

from __future__ import annotations

from rlvr.config.checks import check_combinations, check_config, check_launch
from rlvr.config.commands import EvalCommandConfig, SftCommandConfig, load_command
from rlvr.config.loader import (PRESETS, apply_overrides, build_section, dump, dumps, from_dict, load,
                              parse_override, read_yaml, replace, to_dict)
from rlvr.config.schema import (AgentConfig, Config, CurriculumConfig, DataConfig, DoctorConfig,
                                DistillConfig, DynamicSamplingConfig, EvalConfig, GRPOConfig, LoraConfig,
                                ModelConfig, RolloutConfig, RunConfig)
from rlvr.errors import ConfigError

__all__ = ["AgentConfig", "Config", "ConfigError", "CurriculumConfig", "DataConfig", "DoctorConfig",
           "DistillConfig", "DynamicSamplingConfig", "EvalCommandConfig", "EvalConfig", "GRPOConfig",
           "LoraConfig",
           "ModelConfig", "PRESETS", "RolloutConfig", "RunConfig", "SftCommandConfig", "apply_overrides",
           "build_section", "check_combinations", "check_config", "check_launch", "dump", "dumps",
           "from_dict", "load", "load_command", "parse_override", "read_yaml", "replace", "to_dict"]
