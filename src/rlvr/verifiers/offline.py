"""`rlvr verify`: score a JSONL file offline with any registered verifier.

    rlvr verify --verifier math --input in.jsonl --output out.jsonl [--option timeout_s=1]

Input rows are JSON objects: `response` plus what the verifier needs, as in training data
(`rlvr.data.row_to_problem` builds each Problem, so a row scores here exactly as in training):
`reference` (or `answer`, or `solution`) for math, `constraints: [{"type", "args"}]` for
constraints, a code dataset's own fields (`prompt`, `entry_point`, `test`, ...) or `tests` for
code. `prompt` is optional here (training requires it); other keys are kept and passed to the
verifier as problem metadata, so `extract`, `language`, ... work per row. Output rows repeat the
input and add
`reward`, `correct`, `flags`, `extracted` and `ms`. A progress bar runs on stderr; a summary
(accuracy, mean reward, flag counts, throughput, p50/p99 latency) ends the run.

Guarantees: every row is validated (JSON, required fields) before any scoring; a malformed row
stops the run with one line naming `file:line` and the field, exit status 2, and no output file. A
well-formed row whose reference the verifier cannot use (empty, unparseable) is still written, with
reward 0 and flag `bad_reference` (and the reason in `failed`): one bad reference does not refuse
the whole file. Training-data loading (`rlvr.data.check_references`) still refuses such rows.
Output is written to a temporary file beside the target and renamed into place at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import yaml

from rlvr.data import row_to_problem
from rlvr.errors import DataError, UserError
from rlvr.types import Problem, Score
from rlvr.verifiers.base import get_verifier, verifier_names, verifier_options

# Any one of these fields is required, per verifier.
_REQUIRED = {"math": ("reference", "answer", "solution"), "constraints": ("constraints",)}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rlvr verify", description="Score a JSONL file offline.")
    p.add_argument("--verifier", required=True, help=f"one of: {', '.join(verifier_names())}")
    p.add_argument("--input", required=True, type=Path, help="JSONL file of rows to score")
    p.add_argument("--output", required=True, type=Path, help="JSONL file to write")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="verifier option (value read as YAML), e.g. timeout_s=1 or extract=boxed")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--no-progress", action="store_true")
    return p


def _options(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--option {pair!r}: expected KEY=VALUE")
        out[key.strip()] = yaml.safe_load(value)
    return out


def read_rows(path: Path, verifier: str) -> list[dict[str, Any]]:
    """Parse and check every row; raise DataError naming file:line and field on the first bad one."""
    if not path.is_file():
        raise UserError(f"input file {path} does not exist")
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"invalid JSON ({exc.msg})", where=where) from None
            if not isinstance(row, dict):
                raise DataError("a row must be a JSON object", where=where)
            if "response" not in row:
                raise DataError("missing field 'response'", where=where)
            needed = _REQUIRED.get(verifier, ())
            if needed and not any(field in row for field in needed):
                others = f" (or {', '.join(repr(f) for f in needed[1:])})" if needed[1:] else ""
                raise DataError(f"missing field {needed[0]!r}{others}", where=where)
            if not isinstance(row["response"], str):
                raise DataError("field 'response' must be a string", where=where)
            row["_line"] = line_no
            rows.append(row)
    return rows


def _problem(row: dict[str, Any], path: Path, verifier: str) -> Problem:
    """The Problem training would build from this row (the CLI's verifier, whatever the row
    names), with an id unique to its line."""
    where = f"{path}:{row['_line']}"
    fields = {k: v for k, v in row.items() if k not in ("response", "_line", "verifier")}
    problem = row_to_problem(fields, where, row["_line"], verifier, require_prompt=False)
    return dataclasses.replace(problem, id=where)


def _bad_references(verifier: Any, problems: list[Problem], name: str) -> dict[str, str]:
    """Problem id → why its reference cannot be used, for the rows that will score 0."""
    verdicts: dict[str, str | None] = {}
    bad: dict[str, str] = {}
    for problem in problems:
        field = problem.metadata.get("reference_column", _REQUIRED.get(name, ("reference",))[0])
        key = json.dumps([problem.reference, problem.metadata.get("constraints"),
                          problem.metadata.get("extract")], sort_keys=True, default=str)
        if key not in verdicts:
            try:
                verifier.check_reference(problem)
                verdicts[key] = None
            except ValueError as exc:
                message = str(exc).replace(f"problem {problem.id}: ", "")
                verdicts[key] = f"field {field!r}: {message}"
        if verdicts[key] is not None:
            bad[problem.id] = verdicts[key]  # type: ignore[assignment]
    return bad


def _out_row(row: dict[str, Any], score: Score, ms: float) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k != "_line"}
    out.update(reward=score.reward, correct=score.correct, flags=list(score.flags),
               extracted=score.extracted, ms=round(ms, 3))
    if score.details and "failed" in score.details:
        out["failed"] = score.details["failed"]
    return out


def _score_chunk(verifier: Any, rows: list, problems: list, bad: dict[str, str]) -> list[Score]:
    """Scores of one chunk; rows with an unusable reference score 0 without reaching the verifier."""
    good = [i for i, p in enumerate(problems) if p.id not in bad]
    scored = verifier.score_batch([rows[i]["response"] for i in good], [problems[i] for i in good])
    out: list[Score] = [Score(0.0, False, ("bad_reference",), details={"failed": bad.get(p.id, "")})
                        for p in problems]
    for i, score in zip(good, scored):
        out[i] = score
    return out


def _score_all(verifier: Any, rows: list, problems: list, batch_size: int, progress: bool,
               sink, bad: dict[str, str]) -> list[float]:
    from rich.progress import Progress

    latencies: list[float] = []
    with Progress(disable=not progress, transient=False) as bar:
        task = bar.add_task("verifying", total=len(rows))
        for start in range(0, len(rows), batch_size):
            chunk = slice(start, start + batch_size)
            t0 = time.perf_counter()
            scores = _score_chunk(verifier, rows[chunk], problems[chunk], bad)
            share = (time.perf_counter() - t0) * 1000 / max(1, len(scores))
            for row, score in zip(rows[chunk], scores):
                ms = float((score.details or {}).get("ms", share))
                latencies.append(ms)
                sink(_out_row(row, score, ms), score)
            bar.advance(task, len(scores))
    return latencies


def _summary(n: int, stats: dict[str, Any], latencies: list[float], seconds: float) -> str:
    lat = sorted(latencies) or [0.0]
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]  # noqa: E731
    flags = ", ".join(f"{k}={v}" for k, v in sorted(stats["flags"].items())) or "none"
    return (f"rows={n} correct={stats['correct']} ({100 * stats['correct'] / max(1, n):.1f}%) "
            f"mean_reward={stats['reward'] / max(1, n):.4f} flags: {flags}\n"
            f"{n / max(seconds, 1e-9):.0f} rows/s, p50={pct(0.5):.2f} ms, p99={pct(0.99):.2f} ms, "
            f"{seconds:.2f} s")


def run(args: argparse.Namespace) -> str:
    """Score `args.input` into `args.output`; returns the summary text."""
    try:
        options = _options(args.option)
        valid = verifier_options(args.verifier)
        unknown = sorted(set(options) - set(valid)) if valid is not None else []
        if unknown:
            raise UserError(f"verifier {args.verifier!r} has no option {', '.join(unknown)}; "
                            f"valid options: {', '.join(valid or []) or 'none'}")
        verifier = get_verifier(args.verifier, **options)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    except (TypeError, ValueError) as exc:
        raise UserError(f"verifier {args.verifier!r}: {exc}") from None
    rows = read_rows(args.input, args.verifier)
    problems = [_problem(r, args.input, args.verifier) for r in rows]
    bad = _bad_references(verifier, problems, args.verifier)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    stats: dict[str, Any] = {"correct": 0, "reward": 0.0, "flags": {}}
    fd, tmp = tempfile.mkstemp(prefix=f".{args.output.name}.", dir=args.output.parent)
    t0 = time.perf_counter()
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            def sink(out: dict[str, Any], score: Score) -> None:
                fh.write(json.dumps(out, ensure_ascii=False) + "\n")
                stats["correct"] += int(score.correct)
                stats["reward"] += score.reward
                for flag in score.flags:
                    stats["flags"][flag] = stats["flags"].get(flag, 0) + 1

            latencies = _score_all(verifier, rows, problems, max(1, args.batch_size),
                                   not args.no_progress, sink, bad)
        os.replace(tmp, args.output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        getattr(verifier, "close", lambda: None)()
    return _summary(len(rows), stats, latencies, time.perf_counter() - t0)


def main(argv: Sequence[str]) -> int:
    """Entry point for `rlvr verify ARGS`; returns the exit status."""
    args = _parser().parse_args(list(argv))
    try:
        summary = run(args)
    except UserError as exc:
        print(f"rlvr verify: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
