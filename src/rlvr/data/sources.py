"""Where rows come from: files, saved datasets, folders in the hub's layout, and hub ids.

`load_problems(path, ...)` reads one source and validates every row (file, line or row, field):

- `.jsonl` (and `.json`: JSON lines, or one JSON list as MAWPS ships it): read whole, line-numbered.
- `.parquet`, a `save_to_disk` folder, a folder in the hub's layout (a `README.md` dataset card with
  `configs:`, `data/*.parquet`, or `CONFIG/SPLIT-*.parquet`) and a hub id (`org/name`): through the
  `datasets` library (`load_dataset(folder_or_id, name=config, split=split)`), whose Arrow cache is
  built once (under its file lock, so torchrun ranks build it once and reuse it) and memory-mapped.
  Their rows are validated in one streaming pass and returned as a `ProblemTable`, which builds
  each `Problem` when it is read: a million rows are never all held as Python objects.
- A hub id with no cached copy while offline (or with no reachable hub) fails at once
  (`rlvr.data.hub.check_hub_id`), never after a minute of retries.

Rows go through `rlvr.data.formats` (public layouts, the column map, the prompt template) and then
`rlvr.data.rows.row_to_problem`. Not guaranteed: a row order other than the source's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from rlvr.data import formats
from rlvr.data.hub import check_hub_id, looks_like_hub_id
from rlvr.data.rows import row_to_problem, rows_jsonl
from rlvr.errors import DataError
from rlvr.types import Problem

_BATCH = 1024


@dataclass(frozen=True)
class SourceSpec:
    """How to read one source (`data.*` keys, or one `data.mix` entry). `name` prefixes problem ids
    (`name/id`) and is kept in `metadata["mix"]` when set (mixtures)."""

    config: str = ""
    split: str = "train"
    columns: dict = field(default_factory=dict)
    extractor: str = ""
    template: str = ""
    system: str = ""
    name: str = ""


def _json_rows(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open("rb") as f:
        head = f.read(64).lstrip()
    if path.suffix != ".json" or not head.startswith(b"["):
        yield from rows_jsonl(path)
        return
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"invalid JSON list ({exc})", where=str(path)) from None
    for n, row in enumerate(rows, 1):
        yield f"{path}:item {n}", row


def _hub_layout_kwargs(folder: Path, spec: SourceSpec) -> dict[str, Any] | None:
    """`CONFIG/SPLIT-*.parquet` with no card naming configs: the files of that config and split."""
    card = folder / "README.md"
    if card.exists() and "configs:" in card.read_text(encoding="utf-8", errors="replace"):
        return None
    if spec.config and (folder / spec.config).is_dir():
        return {"path": "parquet",
                "data_files": {spec.split: str(folder / spec.config / f"{spec.split}-*.parquet")}}
    return None


def open_dataset(path: str, spec: SourceSpec, key: str = "data.train_path"):
    """A `datasets.Dataset` for a parquet file, saved folder, hub-layout folder or hub id."""
    import datasets

    local = Path(path).expanduser()
    if not local.exists():
        if not looks_like_hub_id(path):
            raise DataError("file not found", where=path)
        check_hub_id(key, path, "dataset")
    try:
        if local.is_file():
            return datasets.load_dataset("parquet", data_files=str(local), split="train")
        if local.is_dir() and ((local / "dataset_dict.json").exists() or (local / "state.json").exists()):
            return _split_of(datasets.load_from_disk(str(local)), spec.split, path)
        kwargs = _hub_layout_kwargs(local, spec) if local.is_dir() else None
        if kwargs is not None:
            return datasets.load_dataset(kwargs["path"], data_files=kwargs["data_files"], split=spec.split)
        return datasets.load_dataset(path, name=spec.config or None, split=spec.split)
    except DataError:
        raise
    except Exception as exc:  # datasets raises many types for unreadable sources and unknown splits
        raise DataError(f"cannot read dataset ({type(exc).__name__}: {str(exc).splitlines()[0][:400]})",
                        where=_label(path, spec)) from None


def _split_of(ds, split: str, path: str):
    import datasets

    if not isinstance(ds, datasets.DatasetDict):
        return ds
    if split in ds:
        return ds[split]
    if len(ds) == 1:
        return next(iter(ds.values()))
    raise DataError(f"no split {split!r} (splits: {', '.join(ds)}); set data.split", where=path)


def _label(path: str, spec: SourceSpec) -> str:
    local = Path(path).expanduser()
    if local.is_file() or (local.exists() and not spec.config):
        return path
    return f"{path}[{spec.config or 'default'}/{spec.split}]"


class ProblemTable(Sequence[Problem]):
    """The validated rows of a `datasets.Dataset`, each built into a `Problem` when read."""

    def __init__(self, ds, label: str, layout: formats.Layout, spec: SourceSpec,
                 default_verifier: str, prompt_field: str):
        self.ds, self.label, self.layout, self.spec = ds, label, layout, spec
        self.default_verifier, self.prompt_field = default_verifier, prompt_field
        self.verifier_names: set[str] = set()   # filled by the validation pass

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.problem(self.ds[i], i)

    def problem(self, row: dict, i: int) -> Problem:
        where = f"{self.label}:row {i + 1}"
        mapped = formats.apply(self.layout, row, where, self.spec.template, self.spec.system)
        return named(row_to_problem(mapped, where, i, self.default_verifier, self.layout.prompt
                                    if self.layout.passthrough else "prompt"), self.spec.name)

    def __iter__(self) -> Iterator[Problem]:
        n = 0
        for batch in self.ds.iter(batch_size=_BATCH):
            cols = list(batch)
            for values in zip(*(batch[c] for c in cols)):
                yield self.problem(dict(zip(cols, values)), n)
                n += 1


def named(problem: Problem, name: str) -> Problem:
    """A mixture source's problem: id `name/id`, `metadata["mix"] = name` (unchanged when no name)."""
    if not name:
        return problem
    problem.metadata["mix"] = name
    return Problem(id=f"{name}/{problem.id}", prompt=problem.prompt, reference=problem.reference,
                   verifier=problem.verifier, metadata=problem.metadata)


def _validated(problems, where: str) -> set[str]:
    """Every row once (building it validates it); ids unique. Returns the verifier names seen."""
    seen: dict[str, int] = {}   # id -> row index (a million `where` strings would cost ~100 MB)
    names: set[str] = set()
    count = 0
    for i, problem in enumerate(problems):
        first = seen.setdefault(problem.id, i)
        if first != i:
            earlier = problems[first].metadata.get("source")
            raise DataError(f"duplicate id {problem.id!r} (first at {earlier})",
                            where=problem.metadata.get("source"))
        names.add(problem.verifier)
        count += 1
    if not count:
        raise DataError("no problems (the file is empty)", where=where)
    return names


def named_verifiers(problems: Sequence[Problem]) -> set[str]:
    """The verifiers `problems` name: from the validation pass when it counted them (a table
    source), else by reading every problem."""
    known = getattr(problems, "verifier_names", None)
    return set(known) if known is not None else {p.verifier for p in problems}


def load_problems(path: str | Path, default_verifier: str = "", prompt_field: str = "prompt",
                  spec: SourceSpec | None = None, key: str = "data.train_path") -> Sequence[Problem]:
    """Read and validate every row of one source; DataError at the first bad one. `prompt_field`
    names the prompt column (MBPP `text`, ...); `spec` the hub config and split, the column map,
    the template (`SourceSpec`). JSONL comes back as a list, table sources as a `ProblemTable`."""
    spec = spec or SourceSpec()
    path = str(path)
    local = Path(path).expanduser()
    if local.suffix in {".jsonl", ".json"}:
        if not local.exists():
            raise DataError("file not found", where=path)
        problems = _json_problems(local, default_verifier, prompt_field, spec)
        _validated(problems, path)
        return problems
    ds = open_dataset(path, spec, key)
    label = _label(path, spec)
    layout = formats.detect(set(ds.column_names), label, prompt_field, spec.columns, spec.extractor)
    table = ProblemTable(ds, label, layout, spec, default_verifier or layout.verifier, prompt_field)
    table.verifier_names = _validated(table, label)
    return table


def _json_problems(path: Path, default_verifier: str, prompt_field: str,
                   spec: SourceSpec) -> list[Problem]:
    problems: list[Problem] = []
    layout: formats.Layout | None = None
    for index, (where, row) in enumerate(_json_rows(path)):
        if layout is None and isinstance(row, dict):
            layout = formats.detect(set(row), where, prompt_field, spec.columns, spec.extractor)
        mapped = formats.apply(layout, row, where, spec.template, spec.system) if layout else row
        field_name = layout.prompt if layout and layout.passthrough else "prompt"
        verifier = default_verifier or (layout.verifier if layout else "")
        problems.append(named(row_to_problem(mapped, where, index, verifier, field_name), spec.name))
    return problems
