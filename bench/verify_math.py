"""Benchmark: rlvr's MathVerifier vs math-verify's own `parse` + `verify`, in one run.

Workload (generated, seeded): P problems × G sampled responses, like one RL step after another.
References are integers, decimals, fractions and LaTeX expressions (surds, multiples of pi,
polynomials). Each response has a few sentences of reasoning and a boxed answer: right in the same
form, right in another form (0.5 for \\frac{1}{2}), wrong, with several answers, or with none. As in
real rollouts, samples in a group repeat (G=8 samples drawn from 3–5 distinct responses).

rlvr scores each group with one `score_batch` call (the training loop's batch API); math-verify
scores each response with `verify(parse(gold), parse(response))`, as its README shows. Latency per
check: math-verify per call; rlvr the group's time shared over its G checks. Both see the same
responses in the same order, after both warmed up on a separate workload. The last line is one JSON object with `ratio` = rlvr checks/s ÷
math-verify checks/s.

    .venv/bin/python bench/verify_math.py [--problems 300] [--group 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import time

from rlvr.types import Problem
from rlvr.verifiers.math import MathVerifier

FILLER = ["First, we simplify the expression step by step.", "Let us check the boundary cases.",
          "Substituting back, the equation holds.", "We compute the sum of the terms carefully.",
          "By symmetry, both halves contribute equally.", "Multiplying both sides by 2 gives",
          "So the intermediate value is $x_1 = 7$ and then $x_2 = 12$.",
          "Using the identity $a^2 - b^2 = (a-b)(a+b)$ we factor."]


def _reference(rng: random.Random) -> tuple[str, list[str], list[str]]:
    """A reference, other right spellings of it, and wrong answers."""
    kind = rng.choice(["int", "int", "decimal", "frac", "latex"])
    if kind == "int":
        n = rng.randint(-50, 5000)
        alt = [f"{n:,}" if abs(n) >= 1000 else f"{n}.0", f"x = {n}"]
        return str(n), alt, [str(n + rng.choice([-2, -1, 1, 10])), str(n * 2)]
    if kind == "decimal":
        n = rng.randint(1, 999) / 100
        return f"{n}", [f"{n:.2f}", f"\\frac{{{int(round(n * 100))}}}{{100}}"], [f"{n + 0.01:.2f}", f"{n * 10:g}"]
    if kind == "frac":
        a, b = rng.randint(1, 30), rng.randint(2, 31)
        return f"\\frac{{{a}}}{{{b}}}", [f"{a}/{b}", f"\\dfrac{{{a * 2}}}{{{b * 2}}}"], [f"\\frac{{{b}}}{{{a}}}", f"\\frac{{{a + 1}}}{{{b}}}"]
    a, b = rng.randint(2, 9), rng.choice([2, 3, 5, 6, 7])
    form = rng.choice(["surd", "pi", "poly"])
    if form == "surd":
        return f"{a}\\sqrt{{{b}}}", [f"\\sqrt{{{a * a * b}}}", f"{a} \\sqrt {b}"], [f"{a + 1}\\sqrt{{{b}}}", f"\\sqrt{{{a * b}}}"]
    if form == "pi":
        return f"\\frac{{{a}\\pi}}{{{b}}}", [f"\\frac{{{a}}}{{{b}}}\\pi", f"{a}\\pi/{b}"], [f"\\frac{{{b}\\pi}}{{{a}}}", f"{a}\\pi"]
    return f"x^2 + {a}x + {b}", [f"{b} + {a}x + x^2", f"x^{{2}}+{a}x+{b}"], [f"x^2 + {b}x + {a}", f"x^2 - {a}x + {b}"]


def _response(rng: random.Random, answer_tex: str) -> str:
    steps = " ".join(rng.choice(FILLER) for _ in range(rng.randint(3, 8)))
    return f"{steps}\n\nTherefore, the final answer is $\\boxed{{{answer_tex}}}$."


def make_workload(problems: int, group: int, seed: int) -> list[tuple[str, list[str]]]:
    rng = random.Random(seed)
    work = []
    for _ in range(problems):
        ref, alts, wrongs = _reference(rng)
        pool = []
        for _ in range(rng.randint(3, 5)):
            r = rng.random()
            if r < 0.40:
                pool.append(_response(rng, ref))
            elif r < 0.55:
                pool.append(_response(rng, rng.choice(alts)))
            elif r < 0.85:
                pool.append(_response(rng, rng.choice(wrongs)))
            elif r < 0.93:
                pool.append(_response(rng, f"{ref}") + f" Or maybe $\\boxed{{{wrongs[0]}}}$.")
            else:
                pool.append(" ".join(rng.choice(FILLER) for _ in range(6)))
        work.append((ref, [rng.choice(pool) for _ in range(group)]))
    return work


def bench_math_verify(work) -> tuple[float, list[float], list[bool]]:
    from math_verify import parse, verify

    lat, verdicts = [], []
    t0 = time.perf_counter()
    for ref, responses in work:
        for response in responses:
            t = time.perf_counter()
            verdicts.append(bool(verify(parse(f"${ref}$"), parse(response))))
            lat.append((time.perf_counter() - t) * 1000)
    return time.perf_counter() - t0, lat, verdicts


def bench_rlvr(work, verifier: MathVerifier) -> tuple[float, list[float], list[bool]]:
    lat, verdicts = [], []
    t0 = time.perf_counter()
    for i, (ref, responses) in enumerate(work):
        problems = [Problem(f"p{i}", "", ref)] * len(responses)
        t = time.perf_counter()
        scores = verifier.score_batch(responses, problems)
        share = (time.perf_counter() - t) * 1000 / len(responses)
        lat.extend([share] * len(responses))
        verdicts.extend(s.correct for s in scores)
    return time.perf_counter() - t0, lat, verdicts


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=300)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    work = make_workload(args.problems, args.group, args.seed)
    n = sum(len(r) for _, r in work)
    verifier = MathVerifier(timeout_s=2.0, workers=2)
    verifier.pool.warm()
    # Both sides first score a separate warm-up workload: sympy's caches and math-verify's lazy
    # set-up are paid once per process, and rlvr's worker processes are separate processes.
    warmup = make_workload(60, args.group, args.seed + 1000)
    bench_math_verify(warmup)
    bench_rlvr(warmup, verifier)
    mv_s, mv_lat, mv_ok = bench_math_verify(work)
    rl_s, rl_lat, rl_ok = bench_rlvr(work, verifier)
    verifier.close()
    agree = statistics.mean(a == b for a, b in zip(mv_ok, rl_ok))
    result = {
        "checks": n, "rlvr_checks_per_s": round(n / rl_s, 1), "math_verify_checks_per_s": round(n / mv_s, 1),
        "rlvr_p50_ms": round(_pct(rl_lat, 0.5), 3), "rlvr_p99_ms": round(_pct(rl_lat, 0.99), 3),
        "math_verify_p50_ms": round(_pct(mv_lat, 0.5), 3), "math_verify_p99_ms": round(_pct(mv_lat, 0.99), 3),
        "rlvr_accuracy": round(statistics.mean(rl_ok), 4), "math_verify_accuracy": round(statistics.mean(mv_ok), 4),
        "verdict_agreement": round(agree, 4), "ratio": round((n / rl_s) / (n / mv_s), 2),
    }
    print(f"rlvr        {result['rlvr_checks_per_s']:>9} checks/s  p50 {result['rlvr_p50_ms']} ms  p99 {result['rlvr_p99_ms']} ms")
    print(f"math-verify {result['math_verify_checks_per_s']:>9} checks/s  p50 {result['math_verify_p50_ms']} ms  p99 {result['math_verify_p99_ms']} ms")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
