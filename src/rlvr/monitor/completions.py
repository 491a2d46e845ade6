"""Every completion of a logged step as one row of `RUN_DIR/completions.parquet` (`run.log_completions`).

A row: step, policy_version, problem_id, group and sample index, prompt, completion, reward, the
reward of each verifier term (`rewards`, a JSON object: a composite's `details["terms"]`, else
{the problem's verifier: reward}), correct, advantage, flags, finish_reason, tokens. The file is
rewritten whole (to a temporary file, then renamed) each time rows are added or cut, so a kill
never leaves a half-written file; on resume it is cut back to the row count saved in the
checkpoint, so no row is written twice. pyarrow (a dependency of `datasets`) is imported only here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from rlvr.types import Group

FILE = "completions.parquet"


def _schema():
    import pyarrow as pa

    return pa.schema([("step", pa.int64()), ("policy_version", pa.int64()), ("problem_id", pa.string()),
                      ("group", pa.int64()), ("sample", pa.int64()), ("prompt", pa.string()),
                      ("completion", pa.string()), ("reward", pa.float64()), ("rewards", pa.string()),
                      ("correct", pa.bool_()), ("advantage", pa.float64()),
                      ("flags", pa.list_(pa.string())), ("finish_reason", pa.string()),
                      ("tokens", pa.int64())])


def completion_rows(step: int, groups: Sequence[Group], advantages) -> list[dict[str, Any]]:
    """One row per completion of the step's groups; advantages [P, G]."""
    rows = []
    for p, group in enumerate(groups):
        problem = group.problem
        prompt = problem.prompt if isinstance(problem.prompt, str) else json.dumps(problem.prompt)
        for g, c in enumerate(group.completions):
            score = c.score
            reward = score.reward if score else None
            terms = (score.details or {}).get("terms") if score else None
            rows.append({
                "step": step, "policy_version": group.policy_version, "problem_id": problem.id,
                "group": p, "sample": g, "prompt": prompt, "completion": c.text, "reward": reward,
                "rewards": json.dumps(terms if terms else {problem.verifier: reward}),
                "correct": bool(score and score.correct), "advantage": float(advantages[p, g]),
                "flags": list(score.flags) if score else [], "finish_reason": c.finish_reason,
                "tokens": len(c.token_ids)})
    return rows


def row_count(path: Path) -> int:
    if not path.exists():
        return 0
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def append(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(list(rows), schema=_schema())
    if path.exists():
        table = pa.concat_tables([pq.read_table(path, schema=_schema()), table])
    _replace(path, table)


def truncate(path: Path, rows: int) -> None:
    """Keep the first `rows` rows (the file goes when none are left)."""
    if row_count(path) <= rows:
        return
    if rows == 0:
        path.unlink()
        return
    import pyarrow.parquet as pq

    _replace(path, pq.read_table(path, schema=_schema()).slice(0, rows))


def read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def _replace(path: Path, table) -> None:
    import pyarrow.parquet as pq

    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
