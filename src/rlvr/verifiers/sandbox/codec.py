"""Plain-value codec shared by the trusted side and the sandbox (stdlib only, no rlvr imports).

Values cross the boundary as JSON text. Builtin containers are tagged so that tuples, sets, dicts
with non-string keys, non-finite floats and huge ints (as hex, which Python's limit on decimal
int/str conversion does not cover) survive the trip; any other type, including subclasses
of builtins (an `int` subclass, an object whose `__eq__` always answers True), is encoded as
`{"bad": type name}` and can never compare equal to an expected value. Decoding builds genuine
builtins only: nothing returned by the sandbox is ever unpickled or evaluated.
Not guaranteed: identity or aliasing (shared sub-lists come back as copies); recursion depth is
bounded by the interpreter, and a self-referencing container encodes as `bad`.
"""

import json
import math

_FINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}
_BIG = 1 << 64


def encode(value, _type=type, _isfinite=math.isfinite):
    """Turn a plain Python value into a JSON-compatible tree (see module docstring)."""
    t = _type(value)
    if t is int and not -_BIG < value < _BIG:
        return {"i": hex(value)}  # power-of-two bases escape the int/str digit limit
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return value if _isfinite(value) else {"f": repr(value)}
    if t is list:
        return [encode(v) for v in value]
    if t is tuple:
        return {"t": [encode(v) for v in value]}
    if t is dict:
        return {"d": [[encode(k), encode(v)] for k, v in value.items()]}
    if t is set or t is frozenset:
        return {"s": [encode(v) for v in value]}
    if t is bytes:
        return {"b": value.hex()}
    return {"bad": getattr(t, "__name__", "?")}


def decode(tree):
    """Inverse of `encode`; unknown tags, unhashable keys and absurd nesting decode to `Bad`."""
    try:
        return _decode(tree)
    except RecursionError:
        return Bad("too deep")


def _decode(tree):
    if tree is None or type(tree) in (bool, int, float, str):
        return tree
    if type(tree) is list:
        return [_decode(v) for v in tree]
    if type(tree) is dict and len(tree) == 1:
        (tag, body), = tree.items()
        try:
            return _decode_tagged(tag, body)
        except (TypeError, ValueError, KeyError):
            return Bad("malformed")
    return Bad("malformed")


def _decode_tagged(tag, body):
    if tag == "f":
        return _FINITE[body]
    if tag == "i":
        return int(body, 16)
    if tag == "t":
        return tuple(_decode(v) for v in body)
    if tag == "d":
        return {_decode(k): _decode(v) for k, v in body}
    if tag == "s":
        return set(_decode(v) for v in body)
    if tag == "b":
        return bytes.fromhex(body)
    if tag == "bad":
        return Bad(str(body))
    return Bad("malformed")


class Bad:
    """A value the sandbox could not express as plain data; equal to nothing, itself included."""

    __slots__ = ("type_name",)

    def __init__(self, type_name):
        self.type_name = type_name

    def __eq__(self, other):
        return False

    __hash__ = object.__hash__

    def __repr__(self):
        return f"Bad({self.type_name!r})"


def dumps(tree):
    """Compact JSON with non-finite floats refused (they are tagged by `encode`)."""
    return json.dumps(tree, separators=(",", ":"), allow_nan=False)


def _no_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def loads(text):
    """Strict JSON: NaN/Infinity literals are rejected, so only `encode`d floats are non-finite.

    Every failure, absurd nesting included, is a ValueError.
    """
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
