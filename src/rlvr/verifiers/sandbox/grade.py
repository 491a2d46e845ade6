"""Turn a zygote result into (passed, total, flags) on the trusted side.

The job's stdout must be exactly the driver's event lines, in order: case 0, 1, 2, ... then
`done`. Anything else (a line that is not JSON, an index out of order, a missing `done` after a
clean exit) means the candidate interfered with the result channel, and the job counts as
`crash` with nothing passed. Flags: `timeout`, `output_limit`, `crash`. `failure_watch` gives
the pool a predicate that stops a job at its first failing case when the reward is binary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from rlvr.verifiers.sandbox import codec
from rlvr.verifiers.sandbox.compare import case_passes, stdout_matches
from rlvr.verifiers.sandbox.spec import TestSpec

_STATUS_FLAGS = {"timeout": "timeout", "output_limit": "output_limit", "zygote_lost": "crash"}


@dataclass(frozen=True)
class Outcome:
    passed: int
    total: int
    flags: tuple[str, ...]


def _events(out: str) -> list | None:
    events = []
    for line in out.splitlines():
        try:
            event = codec.loads(line)
        except ValueError:
            return None
        if not isinstance(event, list) or not event:
            return None
        events.append(event)
    return events


def _case_results(events: list, total: int) -> tuple[list, bool] | None:
    """Results in index order and whether `done` closed them; None when the stream is forged."""
    results: list = []
    done = False
    for event in events:
        if done:
            return None
        if event[0] == "done" and len(event) == 1:
            done = True
        elif event[0] == "case" and len(event) == 3 and event[1] == len(results) < total:
            results.append(event[2])
        elif event[0] == "load" and not results:
            return [], False
        else:
            return None
    return results, done


def _case_ok(spec: TestSpec, index: int, result: Any, rel_tol: float, abs_tol: float) -> bool:
    if spec.kind == "call":
        return case_passes(codec.decode(result), spec.cases[index], rel_tol, abs_tol)
    return (isinstance(result, dict) and result.get("exc") is None
            and isinstance(result.get("out"), str)
            and stdout_matches(result["out"], spec.stdio[index][1]))


def failure_watch(spec: TestSpec, rel_tol: float = 1e-9, abs_tol: float = 1e-9
                  ) -> Callable[[str], bool] | None:
    """For binary rewards: a predicate on streamed result lines, True at the first failure."""
    if spec.kind == "check":
        return None
    total = len(spec.cases) if spec.kind == "call" else len(spec.stdio)

    def failed(line: str) -> bool:
        try:
            event = codec.loads(line)
        except ValueError:
            return True
        if isinstance(event, list) and event[:1] == ["load"]:
            return True
        if not (isinstance(event, list) and len(event) == 3 and event[0] == "case"
                and type(event[1]) is int and 0 <= event[1] < total):
            return False
        return not _case_ok(spec, event[1], event[2], rel_tol, abs_tol)
    return failed


def grade(spec: TestSpec, reply: dict, rel_tol: float = 1e-9, abs_tol: float = 1e-9) -> Outcome:
    total = len(spec.cases) if spec.kind == "call" else len(spec.stdio) or 1
    flags = [_STATUS_FLAGS[reply["status"]]] if reply["status"] in _STATUS_FLAGS else []
    events = _events(reply.get("out", ""))
    if events is None:
        return Outcome(0, total, tuple(flags or ["crash"]))
    if spec.kind == "check":
        if events == [["check", "pass"], ["done"]] and not flags and reply.get("code") == 0:
            return Outcome(1, 1, ())
        wrong = events == [["check", "AssertionError"], ["done"]]
        return Outcome(0, 1, tuple(flags or ([] if wrong else ["crash"])))
    parsed = _case_results(events, total)
    if parsed is None:
        return Outcome(0, total, tuple(flags or ["crash"]))
    results, done = parsed
    passed = sum(_case_ok(spec, i, r, rel_tol, abs_tol) for i, r in enumerate(results))
    if spec.kind == "call":
        crashed = any(codec.decode(r)[0] != "ok" for r in results if isinstance(r, list))
    else:
        crashed = any(isinstance(r, dict) and r.get("exc") for r in results)
    stopped = reply["status"] == "stopped"  # killed by us at the first failure: not a crash
    if crashed or (not stopped and (not done or reply.get("code") != 0)):
        flags = flags or ["crash"]
    return Outcome(passed, total, tuple(flags))
