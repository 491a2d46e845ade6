"""Public dataset layouts read as they ship, and the column map for everything else.

`detect(columns, spec)` picks, once per source from its column names, which column is the prompt,
which holds the reference and how the reference is extracted from it:

- rows with the prompt column (`prompt`, or `data.prompt_field`): read as `rlvr.data.rows` reads
  them (the source's verifier);
- GSM8K, `question` + `answer`: reference = the text after the last `####`, thousands separators
  dropped (extractor `gsm8k`); verifier math;
- `problem` + `answer` (DeepScaleR, NuminaMath style): the answer as it is; verifier math;
- MATH, `problem` + `solution`: the last `\\boxed{...}`, nested braces kept whole (`boxed`); math;
- MAWPS, `sQuestion` + `lSolutions`: the first solution, `5.0` written `5` (`first`); math.

Anything else needs `data.columns: {prompt: COL, reference: COL}` (optionally `id`, `verifier`) and
`data.reference_extractor` (`gsm8k` | `boxed` | `none`). The column the reference came from stays in
the problem's metadata (GSM8K's worked solution without its `<<48/2=24>>` calculator notes).
`data.prompt_template` (`{prompt}` or any `{column}`; other braces, as in `\\boxed{}`, are kept)
and `data.system_prompt` shape the prompt text; the chat template applies later, as for any row.
Not guaranteed: that a detected layout's rows are what its name suggests (rows are validated, and
references vetted by their verifier, as for any source).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from rlvr.errors import DataError

_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?:\D|$))")
_CALC = re.compile(r"<<[^<>]*>>")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")


def gsm8k_answer(text: Any) -> str:
    """`... #### 1,234` -> `1234`: the final answer after the last `####`."""
    final = str(text).rsplit("####", 1)[1].strip() if "####" in str(text) else ""
    if not final:
        raise ValueError("no final answer: a GSM8K answer ends with '#### N'")
    return _THOUSANDS.sub("", final).rstrip(".").strip()


def last_boxed(text: Any) -> str:
    """The contents of the last `\\boxed{...}` (or `\\fbox{...}`), nested braces kept whole."""
    text = str(text)
    starts = [m.end() for m in _BOX.finditer(text)]
    if not starts:
        raise ValueError("no \\boxed{...} answer in the solution")
    depth, start = 1, starts[-1]
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i].strip()
    raise ValueError("the last \\boxed{ is never closed")


def first_solution(value: Any) -> str:
    """MAWPS `lSolutions` ([5.0] or ["5"]) -> "5"."""
    first = value[0] if isinstance(value, (list, tuple)) and value else value
    if first is None or first == []:
        raise ValueError("no solution")
    if isinstance(first, float) and first.is_integer():
        return str(int(first))
    return str(first).strip()


EXTRACTORS: dict[str, Callable[[Any], Any]] = {"gsm8k": gsm8k_answer, "boxed": last_boxed,
                                               "first": first_solution, "none": lambda v: v}


@dataclass(frozen=True)
class Layout:
    """How one source's rows become `prompt` / `reference` rows (`name` is shown in the banner)."""

    name: str
    prompt: str
    reference: str | None = None
    extractor: str = "none"
    verifier: str = ""
    id: str | None = None
    row_verifier: str | None = None

    @property
    def passthrough(self) -> bool:
        return self.name == "rows"


# (columns that must all be present, layout): the first match wins
KNOWN = (
    ({"question", "answer"}, Layout("gsm8k", "question", "answer", "gsm8k", "math")),
    ({"problem", "answer"}, Layout("problem/answer", "problem", "answer", "none", "math")),
    ({"problem", "solution"}, Layout("MATH", "problem", "solution", "boxed", "math")),
    ({"sQuestion", "lSolutions"}, Layout("MAWPS", "sQuestion", "lSolutions", "first", "math")),
)


def detect(columns: set[str], where: str, prompt_field: str = "prompt",
           column_map: Mapping[str, str] | None = None, extractor: str = "") -> Layout:
    """The layout of a source whose rows have `columns`; DataError (naming them) when none fits."""
    if column_map:
        missing = sorted(v for v in column_map.values() if v not in columns)
        if missing:
            raise DataError(f"data.columns names {missing}, which the rows lack (columns: "
                            f"{sorted(columns)})", where=where)
        return Layout("columns", column_map.get("prompt", prompt_field), column_map.get("reference"),
                      extractor or "none", id=column_map.get("id"), row_verifier=column_map.get("verifier"))
    if prompt_field in columns:
        return Layout("rows", prompt_field)
    for need, layout in KNOWN:
        if need <= columns:
            return layout if not extractor else Layout(**{**layout.__dict__, "extractor": extractor})
    raise DataError(f"missing field {prompt_field!r}, and the columns {sorted(columns)} are no known "
                    "layout (GSM8K question/answer, problem/answer, MATH problem/solution); map yours "
                    "with data.columns: {prompt: COLUMN, reference: COLUMN} (and "
                    "data.reference_extractor: gsm8k | boxed | none)", where=where)


def fill_template(template: str, prompt: str, row: Mapping[str, Any]) -> str:
    """`template` with `{prompt}` and `{column}` replaced; any other brace text is kept as it is."""
    def sub(m: re.Match) -> str:
        key = m.group(1)
        if key == "prompt":
            return prompt
        return str(row[key]) if key in row else m.group(0)
    return _PLACEHOLDER.sub(sub, template)


def shape_prompt(prompt: Any, row: Mapping[str, Any], template: str, system: str, where: str) -> Any:
    """The prompt after `data.prompt_template` and `data.system_prompt` (text prompts; a chat
    prompt gets the system message only when it has none)."""
    if isinstance(prompt, list):
        if template:
            raise DataError("data.prompt_template applies to text prompts; this row's prompt is a list "
                            "of chat messages", where=where)
        has_system = any(isinstance(m, dict) and m.get("role") == "system" for m in prompt)
        return prompt if not system or has_system else [{"role": "system", "content": system}, *prompt]
    if not isinstance(prompt, str):
        return prompt   # rows.check_prompt names the type
    text = fill_template(template, prompt, row) if template else prompt
    if not system:
        return text
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


def apply(layout: Layout, row: Any, where: str, template: str = "", system: str = "") -> Any:
    """`row` as a `rlvr.data.rows` row: `prompt`, `reference`, the rest kept (metadata)."""
    if not isinstance(row, dict):
        return row
    if layout.passthrough:
        if not template and not system:
            return row
        return {**row, layout.prompt: shape_prompt(row.get(layout.prompt), row, template, system, where)}
    out = {k: v for k, v in row.items() if k not in {layout.prompt, layout.reference, layout.id,
                                                      layout.row_verifier, "prompt", "reference"}}
    out["metadata"] = dict(row.get("metadata") or {}) if isinstance(row.get("metadata"), dict) else {}
    out["prompt"] = shape_prompt(row.get(layout.prompt), row, template, system, where)
    if layout.reference is not None:
        raw = row.get(layout.reference)
        if raw is None:
            raise DataError(f"missing field {layout.reference!r}", where=where)
        try:
            out["reference"] = EXTRACTORS[layout.extractor](raw)
        except ValueError as exc:
            raise DataError(f"field {layout.reference!r}: {exc}", where=where) from None
        if layout.extractor != "none":
            out["metadata"][layout.reference] = _CALC.sub("", raw) if isinstance(raw, str) else raw
    if layout.id is not None:
        out["id"] = row.get(layout.id)
    if layout.row_verifier is not None:
        out["verifier"] = row.get(layout.row_verifier)
    return out
