"""Loading the run configuration: YAML presets, dotted overrides, and checking every value.

`load(path, overrides)` reads a YAML file (or a preset shipped in the package, by name, e.g.
`quickstart` for `rlvr/configs/quickstart.yaml`), applies `a.b=value` overrides, and builds the
frozen dataclasses of `rlvr.config.schema`, checking every key and value against the field types
(Literal choices, numeric ranges) and each field's rule, then the combinations in
`rlvr.config.checks`, before anything runs. Errors name the key and the allowed values.
Guaranteed: imports no torch, and a value that loads also survives `dump` and `load` unchanged.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Callable, Literal

import yaml

from rlvr.config.checks import check_config
from rlvr.config.schema import RULE, Config
from rlvr.errors import ConfigError

PRESETS = Path(__file__).resolve().parent.parent / "configs"   # package data: found from a wheel install too


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Check `value` against annotation `tp`; convert ints to floats and lists to tuples."""
    origin = typing.get_origin(tp)
    rule = _BY_TYPE.get(tp) if origin is None else _BY_ORIGIN.get(origin)
    if rule is None:
        raise _bad(key, value, tp)
    return rule(key, value, tp)


def _bad(key: str, value: Any, tp: Any) -> ConfigError:
    return ConfigError(f"invalid value {value!r} for {key}; expected {_type_name(tp)}")


def _literal(key: str, value: Any, tp: Any) -> Any:
    args = typing.get_args(tp)
    if value not in args:
        raise ConfigError(f"invalid value {value!r} for {key}; allowed: "
                          + ", ".join(str(a) for a in args))
    return value


def _optional(key: str, value: Any, tp: Any) -> Any:
    args = typing.get_args(tp)
    if value is None and type(None) in args:
        return None
    inner = [a for a in args if a is not type(None)]
    return _coerce(key, value, inner[0])


def _tuple(key: str, value: Any, tp: Any) -> tuple:
    args = typing.get_args(tp)
    if not isinstance(value, (list, tuple)):
        raise _bad(key, value, tp)
    item_types = args if (len(args) != 2 or args[1] is not Ellipsis) else (args[0],) * len(value)
    if len(item_types) != len(value):
        raise _bad(key, value, tp)
    return tuple(_coerce(f"{key}[{i}]", v, t) for i, (v, t) in enumerate(zip(value, item_types)))


def _mapping(key: str, value: Any, tp: Any) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"invalid value {value!r} for {key}; expected a mapping")
    return value


def _bool(key: str, value: Any, tp: Any) -> bool:
    if not isinstance(value, bool):
        raise _bad(key, value, tp)
    return value


def _int(key: str, value: Any, tp: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(key, value, tp)
    return value


def _float(key: str, value: Any, tp: Any) -> float:
    number = value
    if isinstance(value, str):  # YAML 1.1 reads 1e-4 (no dot) as a string
        try:
            number = float(value)
        except ValueError:
            raise _bad(key, value, tp) from None
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        raise _bad(key, value, tp)
    return float(number)


def _str(key: str, value: Any, tp: Any) -> str:
    if not isinstance(value, str):
        raise _bad(key, value, tp)
    return value


# a generic annotation (Literal[...], X | None, tuple[...]) is checked by its origin, a plain one
# by itself; anything else (a list, a set) is not a config type
_BY_ORIGIN: dict[Any, Callable[[str, Any, Any], Any]] = {
    Literal: _literal, typing.Union: _optional, types.UnionType: _optional, tuple: _tuple}
_BY_TYPE: dict[Any, Callable[[str, Any, Any], Any]] = {
    dict: _mapping, bool: _bool, int: _int, float: _float, str: _str}


def _build(cls: type, data: dict[str, Any], prefix: str = "",
           label: Callable[[str], str] = str) -> Any:
    """`cls` from a mapping, every key and value checked; `label` names a key in errors."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        key = f"{prefix}{unknown[0]}"
        raise ConfigError(f"unknown config key {key!r}; allowed keys"
                          f"{' under ' + prefix.rstrip('.') if prefix else ''}: {', '.join(sorted(fields))}")
    kwargs = {}
    for name, value in data.items():
        key, tp = label(f"{prefix}{name}"), hints[name]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise ConfigError(f"{key} must be a mapping of keys; got {value!r}")
            kwargs[name] = _build(tp, value, f"{prefix}{name}.", label)
            continue
        value = _coerce(key, value, tp)
        check = fields[name].metadata.get(RULE)
        if check and not check[0](value):
            raise ConfigError(f"invalid value {value!r} for {key}; expected {check[1]}")
        kwargs[name] = value
    return cls(**kwargs)


def build_section(cls: type, data: dict[str, Any], label: Callable[[str], str] = str) -> Any:
    """A frozen section (e.g. a command's) from a flat mapping, checked like `Config`'s keys."""
    return _build(cls, data, "", label)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse `a.b.c=value`; the value is read as YAML (so 1e-4, true, [1, 2] work)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r} must look like section.key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def apply_overrides(data: dict[str, Any], overrides: typing.Sequence[str]) -> dict[str, Any]:
    """A copy of the nested mapping `data` with each `a.b=value` override set in it."""
    data = _deep_copy(data)
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"cannot set {'.'.join(path)}: {part} is not a section")
            node = child
        node[path[-1]] = value
    return data


def from_dict(data: dict[str, Any], overrides: typing.Sequence[str] = ()) -> Config:
    cfg = _build(Config, apply_overrides(data, overrides))
    check_config(cfg)
    return cfg


def load(path: str | Path | None, overrides: typing.Sequence[str] = ()) -> Config:
    """Load a YAML preset (or the defaults when `path` is None) and apply dotted overrides."""
    return from_dict(read_yaml(path) if path is not None else {}, overrides)


def read_yaml(path: str | Path, presets: Path = PRESETS) -> dict[str, Any]:
    """The mapping in a YAML file, or in a shipped preset named without its suffix."""
    p = _resolve(Path(path), presets)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark else str(p)
        raise ConfigError(f"{where}: invalid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of sections")
    return data


def _resolve(p: Path, presets: Path = PRESETS) -> Path:
    """A file path as given, or a bare name of a shipped preset."""
    if p.is_file():
        return p
    preset = presets / f"{p.name}.yaml"
    if p.name == str(p) and not p.suffix and preset.is_file():
        return preset
    names = ", ".join(sorted(q.stem for q in presets.glob("*.yaml")))
    raise ConfigError(f"config file not found: {p} (shipped presets: {names or 'none'})")


def to_dict(cfg: Any) -> dict[str, Any]:
    """Plain, YAML-safe dict (tuples become lists)."""
    def plain(v: Any) -> Any:
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v
    return plain(dataclasses.asdict(cfg))


def dumps(cfg: Config) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def dump(cfg: Config, path: str | Path) -> None:
    Path(path).write_text(dumps(cfg))


def replace(cfg: Config, overrides: typing.Sequence[str]) -> Config:
    """A copy of `cfg` with dotted overrides applied (validated like `load`)."""
    return from_dict(to_dict(cfg), overrides)


def _deep_copy(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _deep_copy(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_deep_copy(v) for v in d]
    return d

