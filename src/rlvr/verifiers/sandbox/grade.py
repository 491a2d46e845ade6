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
    failure: dict | None = None   # why it failed, for people: see `describe_failure`


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
    """The outcome of one job, with `failure` describing its first failing case when it failed."""
    out = _grade(spec, reply, rel_tol, abs_tol)
    if out.passed == out.total and not out.flags:
        return out
    return Outcome(out.passed, out.total, out.flags, describe_failure(spec, reply, rel_tol, abs_tol))


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def describe_failure(spec: TestSpec, reply: dict, rel_tol: float = 1e-9, abs_tol: float = 1e-9) -> dict:
    """{"case": i, "input", "expected", "got"} for the first failing case (or {"error": ...} when
    the code did not load or the run ended without results), plus "status" and the job's "stderr"
    when there is any. On the trusted side only: the candidate never sees it."""
    info: dict[str, Any] = {"status": reply.get("status")}
    if reply.get("err"):
        info["stderr"] = reply["err"][-500:]
    events = _events(reply.get("out", "")) or []
    if spec.kind == "check":
        info["error"] = next((f"check raised {e[1]}" for e in events if e[:1] == ["check"] and len(e) > 1
                              and e[1] != "pass"), "the test function did not finish")
        return info
    load = next((e for e in events if e[:1] == ["load"]), None)
    if load is not None:
        info["error"] = f"the code did not load: {load[1] if len(load) > 1 else 'error'}"
        return info
    for event in events:
        if event[0] != "case" or len(event) != 3 or not 0 <= event[1] < len(spec.cases or spec.stdio):
            continue
        i, result = event[1], event[2]
        if _case_ok(spec, i, result, rel_tol, abs_tol):
            continue
        if spec.kind == "call":
            status, value = codec.decode(result) if isinstance(result, list) else ("?", result)
            got = f"raised {value}" if status == "exc" else _short(value)
            return {**info, "case": i, "input": _short(spec.cases[i].args),
                    "expected": _short(spec.cases[i].expected), "got": got}
        got = result.get("out", "") if isinstance(result, dict) else result
        exc = result.get("exc") if isinstance(result, dict) else None
        return {**info, "case": i, "input": _short(spec.stdio[i][0]), "expected": _short(spec.stdio[i][1]),
                "got": _short(got) + (f" (ended with {exc})" if exc else "")}
    info["error"] = f"no failing case reported (job {reply.get('status')}, exit code {reply.get('code')})"
    return info


def _grade(spec: TestSpec, reply: dict, rel_tol: float, abs_tol: float) -> Outcome:
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
