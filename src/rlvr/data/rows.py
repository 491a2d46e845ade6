"""One row as a `Problem`, validated (the rules every source shares; sources are `rlvr.data.sources`).

A row holds `prompt` (text, or chat messages as a list of {role, content}; another column with
`prompt_field`), and what its verifier needs: `reference` (math / built-in answers; `answer` and
`solution`, as TRL datasets name it, are read alike), `tests` (code, or a code dataset's own fields
as it ships, see `verifiers/sandbox/shipped.py`), `constraints` (instruction constraints).
Optional: `id` (unique; defaults to the row number), `verifier` (defaults to the dataset's),
`metadata` (a mapping kept with the problem). Unknown top-level keys are kept in metadata. Every
error names the file, the line (1-based, for JSONL) and the field; a file that is
not UTF-8 text is such an error too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from rlvr.errors import DataError
from rlvr.types import Problem

_ROLES = {"system", "user", "assistant", "tool"}


def rows_jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"not UTF-8 text (byte {raw[exc.start]:#04x} at column "
                                f"{exc.start + 1}); save the file as UTF-8", where=f"{path}:{n}") from None
            if not line.strip():
                continue
            try:
                yield f"{path}:{n}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"invalid JSON ({exc.msg} at column {exc.colno})",
                                where=f"{path}:{n}") from None


def _check_prompt(prompt: Any, where: str, field: str = "prompt") -> Any:
    if isinstance(prompt, str):
        if not prompt.strip():
            raise DataError(f"field {field!r} is empty", where=where)
        return prompt
    if isinstance(prompt, list) and prompt:
        for i, m in enumerate(prompt):
            if not isinstance(m, dict) or not isinstance(m.get("content"), str) \
                    or m.get("role") not in _ROLES:
                raise DataError(f"field 'prompt[{i}]' must be {{role: one of {sorted(_ROLES)}, "
                                "content: string}}", where=where)
        return [{"role": m["role"], "content": m["content"]} for m in prompt]
    if prompt is None:
        raise DataError(f"missing field {field!r}", where=where)
    raise DataError(f"field {field!r} must be a string or a list of chat messages, "
                    f"got {type(prompt).__name__}", where=where)


def _reference_column(row: dict, verifier: str) -> str | None:
    """The column holding the reference: `reference`, `answer` or `tests`, else `solution` (MATH's
    worked solution, whose box is the answer) except for code, where a solution is no test."""
    found = next((k for k in ("reference", "answer", "tests") if k in row), None)
    return found or ("solution" if "solution" in row and verifier != "code" else None)


def _row_prompt(row: dict, where: str, field: str, required: bool) -> Any:
    if not required and row.get(field) is None:
        return ""
    return _check_prompt(row.get(field), where, field)


def row_to_problem(row: Any, where: str, index: int, default_verifier: str,
                   prompt_field: str = "prompt", require_prompt: bool = True) -> Problem:
    """One row as a Problem. `require_prompt=False` (`rlvr verify`, which scores responses and
    never generates) lets a row without a prompt through with an empty one."""
    if not isinstance(row, dict):
        raise DataError(f"a row must be a JSON object, got {type(row).__name__}", where=where)
    prompt = _row_prompt(row, where, prompt_field, require_prompt)
    verifier = row.get("verifier") or default_verifier
    if not isinstance(verifier, str) or not verifier:
        raise DataError("field 'verifier' is missing (no default verifier set; use "
                        "data.verifier=NAME or a 'verifier' column)", where=where)
    pid = row.get("id", index)
    if not isinstance(pid, (str, int)) or isinstance(pid, bool):
        raise DataError(f"field 'id' must be a string or integer, got {type(pid).__name__}", where=where)
    metadata = row.get("metadata") or {}
    if isinstance(metadata, str):   # some datasets (LiveCodeBench) ship it as JSON text
        try:
            metadata = json.loads(metadata)
        except json.JSONDecodeError:
            pass
    if not isinstance(metadata, dict):
        raise DataError("field 'metadata' must be a mapping", where=where)
    metadata = dict(metadata)
    ref_column = _reference_column(row, verifier)
    for key, value in row.items():   # a `solution` beside an `answer` stays a column of its own
        if key not in {prompt_field, "verifier", "id", "metadata", "reference", "answer", "tests",
                       ref_column}:
            metadata[key] = value
    reference = row.get(ref_column) if ref_column else None
    if ref_column and ref_column != "reference":  # TRL reward functions get it under this name
        metadata["reference_column"] = ref_column
    metadata["source"] = where
    return Problem(id=str(pid), prompt=prompt, reference=reference, verifier=verifier,
                   metadata=metadata)


def check_references(problems: Iterable[Problem], verifiers: dict[str, Any]) -> None:
    """Ask each problem's verifier to vet its reference; unknown verifier names are errors too."""
    for p in problems:
        where = p.metadata.get("source")
        verifier = verifiers.get(p.verifier)
        if verifier is None:
            raise DataError(f"field 'verifier': unknown verifier {p.verifier!r}; known: "
                            f"{', '.join(sorted(verifiers))}", where=where)
        try:
            verifier.check_reference(p)
        except ValueError as exc:
            raise DataError(f"field 'reference': {exc}", where=where) from None
