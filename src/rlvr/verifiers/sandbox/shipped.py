"""Code datasets in the form they ship, turned into the test specs of `spec.py` (trusted side).

A dataset row's own fields reach the verifier as the problem's prompt and metadata (`data.py`
keeps unknown keys there), so a user loads HumanEval, MBPP, APPS, CodeContests or LiveCodeBench
rows unchanged:

- HumanEval `{prompt, entry_point, test}`: `test` defines `check(candidate)`. The prompt's own
  definitions (helpers such as `poly`, `encode_cyclic`, `encode_shift`, and imports) are run in
  the *test* process before `test`, as HumanEval's harness does by concatenation; the candidate
  process never sees `test`. The prompt is public (the model reads it), so nothing leaks.
- MBPP `{test_list, test_setup_code?, test_imports?}`: the asserts become the body of
  `def check(<entry>)`, the entry point being the function every assert calls; literal asserts
  become call cases (expected values stay here), the rest run in the test process.
  `challenge_test_list` is not used.
- stdin/stdout: APPS `input_output` (JSON text or mapping of `inputs`/`outputs`), CodeContests
  `public_tests`/`private_tests` (`{input: [...], output: [...]}`; `generated_tests` not used),
  LiveCodeBench `public_test_cases`/`private_test_cases` (JSON text, or the base64 + zlib + pickle
  of JSON text its private split ships, decoded with an unpickler that admits no classes). Public
  tests are the visible set, private ones the hidden set that decides the reward.

Not supported (a clear ValueError): APPS rows with `fn_name` and LiveCodeBench `functional` tests
(call-based with dataset-specific lenient comparison), MBPP asserts that call no common function.
"""

from __future__ import annotations

import ast
import base64
import builtins
import io
import json
import pickle
import textwrap
import zlib
from typing import Any

_STDIO_FIELDS = ("input_output", "public_tests", "private_tests", "public_test_cases",
                 "private_test_cases")


def shipped_test_sets(prompt: Any, metadata: dict) -> list[tuple[str, dict]] | None:
    """[(label, spec dict)] for a row in a shipped format, or None when it is in none of them."""
    if isinstance(metadata.get("test"), str) and isinstance(metadata.get("entry_point"), str):
        return [("visible", humaneval_spec(prompt, metadata["entry_point"], metadata["test"]))]
    if metadata.get("test_list") is not None:
        return [("visible", mbpp_spec(metadata["test_list"], metadata.get("test_setup_code") or "",
                                      metadata.get("test_imports") or []))]
    if any(metadata.get(k) is not None for k in _STDIO_FIELDS):
        return stdio_sets(metadata)
    return None


def humaneval_spec(prompt: Any, entry_point: str, test: str) -> dict:
    prelude = prompt if isinstance(prompt, str) else ""
    return {"entry_point": entry_point, "check": f"{prelude}\n\n{test}"}


def mbpp_spec(test_list: Any, setup: Any, imports: Any) -> dict:
    if not (isinstance(test_list, list) and test_list and all(isinstance(t, str) for t in test_list)):
        raise ValueError("'test_list' must be a non-empty list of assert statements")
    if not isinstance(setup, str):
        raise ValueError("'test_setup_code' must be a string")
    if not (isinstance(imports, list) and all(isinstance(i, str) for i in imports)):
        raise ValueError("'test_imports' must be a list of import statements")
    asserts = [textwrap.dedent(t).strip() for t in test_list]
    entry = _common_callee(asserts)
    body = textwrap.indent("\n".join(asserts), "    ")
    source = "\n".join([*imports, setup, f"def check({entry}):", body, ""])
    return {"entry_point": entry, "check": source}


def _common_callee(asserts: list[str]) -> str:
    """The one non-builtin function name called in every assert (first in order if several)."""
    called: list[list[str]] = []
    for i, text in enumerate(asserts):
        try:
            tree = ast.parse(text)
        except SyntaxError as exc:
            raise ValueError(f"test_list[{i}] does not parse: {exc.msg}") from None
        names = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and not hasattr(builtins, n.func.id)]
        called.append(names)
    common = [n for n in dict.fromkeys(called[0]) if all(n in c for c in called[1:])]
    if not common:
        raise ValueError("test_list: no function is called by every assert, so the entry point "
                         "is unknown")
    return common[0]


def stdio_sets(metadata: dict) -> list[tuple[str, dict]]:
    if metadata.get("input_output") is not None:
        return [("visible", _apps(metadata["input_output"]))]
    sets = []
    for label, cc, lcb in (("visible", "public_tests", "public_test_cases"),
                           ("hidden", "private_tests", "private_test_cases")):
        if metadata.get(cc) is not None:
            spec = _codecontests(metadata[cc], cc)
        elif metadata.get(lcb) is not None:
            spec = _livecodebench(metadata[lcb], lcb)
        else:
            continue
        if spec["stdio"]:
            sets.append((label, spec))
    if not sets:
        raise ValueError("the row's stdin/stdout test fields hold no tests")
    if len(sets) == 1:   # private tests alone: the only set, which the verifier calls visible
        return [("visible", sets[0][1])]
    return sets


def _json(value: Any, field: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"'{field}' is not valid JSON ({exc.msg})") from None


def _text(value: Any, field: str, i: int) -> str:
    """A test input/output: text, or a list of lines (as some APPS rows hold them)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value) + "\n"
    raise ValueError(f"'{field}' case {i}: expected text, got {type(value).__name__}")


def _pairs(inputs: Any, outputs: Any, field: str) -> dict:
    if not (isinstance(inputs, list) and isinstance(outputs, list)) or len(inputs) != len(outputs):
        raise ValueError(f"'{field}' needs lists of inputs and outputs of equal length")
    return {"stdio": [{"input": _text(i, field, n), "output": _text(o, field, n)}
                      for n, (i, o) in enumerate(zip(inputs, outputs))]}


def _apps(value: Any) -> dict:
    io_spec = _json(value, "input_output")
    if not isinstance(io_spec, dict):
        raise ValueError("'input_output' must be a mapping with 'inputs' and 'outputs'")
    if io_spec.get("fn_name"):
        raise ValueError("'input_output' with 'fn_name' (call-based APPS) is not supported; "
                         "give such rows as {'entry_point', 'cases'} tests")
    spec = _pairs(io_spec.get("inputs"), io_spec.get("outputs"), "input_output")
    if not spec["stdio"]:
        raise ValueError("'input_output' holds no tests")
    return spec


def _codecontests(value: Any, field: str) -> dict:
    tests = _json(value, field)
    if not isinstance(tests, dict):
        raise ValueError(f"'{field}' must be a mapping with 'input' and 'output' lists")
    return _pairs(tests.get("input"), tests.get("output"), field)


def _livecodebench(value: Any, field: str) -> dict:
    if isinstance(value, str) and not value.lstrip().startswith("["):
        value = _unpack_compressed(value, field)
    cases = _json(value, field)
    if not isinstance(cases, list):
        raise ValueError(f"'{field}' must be a list of {{input, output, testtype}}")
    for i, c in enumerate(cases):
        if not isinstance(c, dict):
            raise ValueError(f"'{field}' case {i} must be a mapping")
        if c.get("testtype", "stdin") != "stdin":
            raise ValueError(f"'{field}' case {i}: testtype {c.get('testtype')!r} is not supported "
                             "(only 'stdin')")
    return _pairs([c.get("input") for c in cases], [c.get("output") for c in cases], field)


MAX_INFLATED = 256 << 20   # LiveCodeBench's largest private tests are a few MiB


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        raise ValueError(f"refusing to unpickle {module}.{name}: only plain text is expected")


def _unpack_compressed(value: str, field: str) -> str:
    """LiveCodeBench's private tests: base64(zlib(pickle(json text))). No class is ever loaded."""
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(base64.b64decode(value, validate=True), MAX_INFLATED + 1)
    except Exception as exc:  # binascii / zlib errors: the field is not in that form
        raise ValueError(f"'{field}' is neither JSON nor LiveCodeBench's compressed form "
                         f"({type(exc).__name__})") from None
    if len(raw) > MAX_INFLATED or inflate.unconsumed_tail:
        raise ValueError(f"'{field}': the compressed payload inflates past {MAX_INFLATED} bytes")
    try:
        text = _NoClasses(io.BytesIO(raw)).load()
    except pickle.UnpicklingError as exc:
        raise ValueError(f"'{field}': the compressed payload does not unpickle ({exc})") from None
    if not isinstance(text, str):
        raise ValueError(f"'{field}': the compressed payload is not JSON text")
    return text
