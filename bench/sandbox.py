"""Sandbox throughput and per-job overhead for trivial jobs, against bare `python -I -S -c`.

Usage: `python bench/sandbox.py [--jobs 2000] [--workers N] [--tier bwrap|landlock]`.
Phases, all in one run: (1) latency: one trivial call job at a time, p50/p99 of the round trip as
the grader sees it; (2) throughput: `--jobs` trivial jobs submitted at once to `--workers`
zygotes; (3) the same through `CodeVerifier.score_batch` with distinct code per job (no cache
hits), i.e. including extraction and grading; (4) the baseline: a bare `subprocess.run` of
`python3 -I -S -c` per job with as many threads as workers (no isolation at all). On a shared,
loaded machine wall-clock rates mostly measure the neighbours, so the run also sums the CPU time
spent per job by the grader, the zygotes (and bwrap) and the jobs themselves: the cores in use
divided by that is the rate the same code reaches on idle cores.
The last line printed is one JSON object holding `jobs_per_s`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from rlvr.types import Problem
from rlvr.verifiers.code import CodeSpec, CodeVerifier
from rlvr.verifiers.sandbox import cgroup
from rlvr.verifiers.sandbox.pool import SandboxPool

TRIVIAL = {"code": "def f():\n    return 1\n", "entry": "f", "args": [[]]}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(pool: SandboxPool, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        reply = pool.run("call", TRIVIAL)
        times.append(time.perf_counter() - start)
        assert reply["out"].startswith('["case",0,["ok",1]]'), reply
    return times


def _cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:  # a job process caught in the listing, gone since
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(pool: SandboxPool, n: int) -> tuple[float, float]:
    """Jobs per second, and CPU ms per job summed over grader, zygotes (with bwrap) and jobs."""
    zygote_pids = [p for z in list(pool._idle.queue) for p in cgroup.tree(z.proc.pid)]
    before = sum(_cpu_s(p) for p in zygote_pids) + sum(os.times()[:2])
    start = time.perf_counter()
    futures = [pool.submit("call", TRIVIAL) for _ in range(n)]
    replies = [f.result() for f in futures]
    secs = time.perf_counter() - start
    assert all(r["status"] == "exit" for r in replies)
    after = sum(_cpu_s(p) for p in zygote_pids) + sum(os.times()[:2])
    cpu = after - before + sum(r["cpu"] for r in replies)
    return n / secs, 1000 * cpu / n


def verifier_throughput(verifier: CodeVerifier, n: int) -> float:
    problem = Problem("b", "", {"entry_point": "f", "cases": [{"args": [], "expected": 1}]}, "code")
    responses = [f"```python\ndef f():\n    return 1  # {i}\n```" for i in range(n)]
    start = time.perf_counter()
    scores = verifier.score_batch(responses, [problem] * n)
    assert all(s.reward == 1.0 for s in scores)
    return n / (time.perf_counter() - start)


def bare_subprocess(python: str, n: int, workers: int) -> float:
    def one(_: int) -> None:
        subprocess.run([python, "-I", "-S", "-c", "print(1)"], capture_output=True, check=True)
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(one, range(n)))
    return n / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--tier", default=None)
    args = parser.parse_args(argv)
    with SandboxPool(args.workers, tier=args.tier) as pool:
        pool.start()
        latency(pool, 50)  # warm-up
        lat = latency(pool, max(200, args.jobs // 4))
        jobs_per_s, cpu_ms = throughput(pool, args.jobs)
        python = pool.caps.python
        tier = pool.tier
    verifier = CodeVerifier(CodeSpec(workers=args.workers, tier=args.tier))
    try:
        verifier.pool.start()
        verified_per_s = verifier_throughput(verifier, args.jobs // 2)
    finally:
        verifier.close()
    bare_per_s = bare_subprocess(python, max(100, args.jobs // 10), args.workers)
    result = {"tier": tier, "workers": args.workers, "jobs": args.jobs,
              "jobs_per_s": round(jobs_per_s, 1),
              "p50_ms": round(1000 * statistics.median(lat), 2),
              "p99_ms": round(1000 * percentile(lat, 0.99), 2),
              "cpu_ms_per_job": round(cpu_ms, 2),
              "cpu_bound_jobs_per_s_on_idle_cores": round(
                  min(args.workers, len(os.sched_getaffinity(0))) * 1000 / cpu_ms, 1),
              "verifier_jobs_per_s": round(verified_per_s, 1),
              "bare_subprocess_jobs_per_s": round(bare_per_s, 1),
              "speedup_vs_bare_subprocess": round(jobs_per_s / bare_per_s, 2),
              "cpus": os.cpu_count(), "load1": round(os.getloadavg()[0], 2)}
    print(f"tier={tier} workers={args.workers}: {jobs_per_s:.0f} jobs/s, per-job p50 "
          f"{result['p50_ms']} ms p99 {result['p99_ms']} ms; via CodeVerifier {verified_per_s:.0f}/s;"
          f" bare subprocess {bare_per_s:.0f}/s", file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
