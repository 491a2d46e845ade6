"""`CodeVerifier`: rewards code answers by running tests in the sandbox (`rlvr.verifiers.sandbox`).

Which code runs (`extract`): "auto" (the default) takes the last complete fenced block of the
response (a Python-tagged or untagged block is preferred over blocks tagged with another language);
a response without a fence is taken as it is when it parses as Python and holds a statement (raw
MBPP-style answers), or, when the prompt is itself Python code (a HumanEval-style signature and
docstring), as the prompt's continuation: prompt + response, when that parses. Prose is `no_code`.
"fenced" takes fenced blocks only; "raw" the whole response as it is. Tests come from `problem.reference` (or
`metadata["tests"]` when the reference is empty, or else the row's own fields in a shipped format:
HumanEval, MBPP, APPS, CodeContests, LiveCodeBench; see `sandbox/shipped.py`) and, when present,
`metadata["hidden_tests"]` (or a dataset's private tests), which then decide the reward (visible
tests are also run and reported in `details`, so special-casing visible tests shows up as a gap).
Reward is 1 when every case passes (`reward="all"`, the default; the job is stopped at its first
failing case) or the fraction passed (`reward="fraction"`). `details` holds `passed`/`total` and,
for a failing answer, `failure`: the first failing case (input, expected, got) or why the code did
not load, and the job's stderr when there is any. Flags: `no_code`, `timeout`, `crash`,
`output_limit`.
Results are cached on (sha256 of the code, test-set hash): GRPO groups repeat completions.
Not guaranteed: that a program passing the tests is correct beyond them, or deterministic timing
(a slow but correct program near the deadline can flip between runs on a loaded machine).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import re
import threading
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Sequence

from rlvr.types import Problem, Score
from rlvr.verifiers.sandbox.grade import Outcome, failure_watch, grade
from rlvr.verifiers.sandbox.pool import SandboxPool
from rlvr.verifiers.sandbox.shipped import shipped_test_sets
from rlvr.verifiers.sandbox.spec import TestSpec, parse_tests

_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)\n?[ \t]*```", re.DOTALL)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}


def extract_code(response: str) -> str | None:
    """The last complete fenced block, preferring Python-tagged or untagged ones."""
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(response)]
    python = [code for tag, code in blocks if tag in _PYTHON_TAGS]
    chosen = python or [code for _, code in blocks]
    return chosen[-1] if chosen and chosen[-1].strip() else None


def _python(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _has_statement(tree: ast.Module) -> bool:
    """A statement beyond bare expressions: `hello` or a sentence that happens to parse is no code."""
    return any(not isinstance(node, ast.Expr) for node in tree.body)


def extract_auto(response: str, prompt: Any = None) -> str | None:
    """A fenced block; else the response itself when it is Python code; else, for a prompt that is
    Python code (HumanEval: a signature and docstring), the prompt continued by the response."""
    fenced = extract_code(response)
    if fenced is not None:
        return fenced
    if isinstance(prompt, str) and response.strip():
        prompt_tree = _python(prompt)
        whole = prompt + response
        if prompt_tree is not None and _has_statement(prompt_tree):
            tree = _python(whole)
            if tree is not None and len(tree.body) >= len(prompt_tree.body):
                return whole
    tree = _python(response)
    return response if tree is not None and _has_statement(tree) else None


@dataclass(frozen=True)
class CodeSpec:
    """What `CodeVerifier` does: its `data.verifier_options.code` keys. The sandbox limits
    (timeout_s, cpu_s, mem_mb, workers, tier, allow_unsafe) go to `SandboxPool` as they are."""

    reward: str = "all"                  # "all": 1 when every case passes; "fraction": the share
    extract: str = "auto"                # "auto", "fenced" or "raw" (the module docstring)
    run_visible: bool = True             # also run the visible tests when hidden ones decide
    float_rel_tol: float = 1e-9
    float_abs_tol: float = 1e-9
    cache_size: int = 100_000            # results kept, keyed by (code hash, test-set hash)
    timeout_s: float = 4.0
    cpu_s: float | None = None
    mem_mb: int = 1024
    workers: int | None = None
    tier: str | None = None
    allow_unsafe: bool = False

    def __post_init__(self):
        if self.reward not in ("all", "fraction"):
            raise ValueError("reward must be 'all' or 'fraction'")
        if self.extract not in ("auto", "fenced", "raw"):
            raise ValueError("extract must be 'auto', 'fenced' or 'raw'")


class CodeVerifier:
    name = "code"

    def __init__(self, spec: CodeSpec = CodeSpec()):
        self.reward, self.run_visible, self.extract = spec.reward, spec.run_visible, spec.extract
        self.tols = (spec.float_rel_tol, spec.float_abs_tol)
        self.pool = SandboxPool(spec.workers, tier=spec.tier, allow_unsafe=spec.allow_unsafe,
                                timeout_s=spec.timeout_s, cpu_s=spec.cpu_s, mem_mb=spec.mem_mb)
        self._cache: OrderedDict[str, Future] = OrderedDict()
        self._specs: dict[str, TestSpec] = {}
        self._cache_size = spec.cache_size
        self._lock = threading.Lock()
        self.counts = {"jobs": 0, "cache_hits": 0}

    @property
    def tier(self) -> str:
        return self.pool.tier

    def sandbox_line(self) -> str:
        """The start banner's line: which tier runs jobs and, when it is not bwrap, why not."""
        why = self.pool.caps.reason or f"tier {self.tier} asked for"
        return f"sandbox: {self.tier}" + (f" (not bwrap: {why})" if self.tier != "bwrap" else "")

    def step_metrics(self) -> dict[str, float]:
        """What the trainer logs every step: whether the preferred tier runs (0 on a weaker one:
        a fallback is visible in metrics.jsonl, not only in the banner and a log line)."""
        return {"sandbox/preferred_tier": float(self.tier == "bwrap")}

    def metrics(self) -> dict[str, Any]:
        """Counters of this verifier's life; `sandbox/weak` stays 0: every format runs isolated."""
        return {"sandbox/tier": self.tier, **self.step_metrics(), "sandbox/jobs": self.counts["jobs"],
                "sandbox/cache_hits": self.counts["cache_hits"], "sandbox/weak": 0}

    def check_reference(self, problem: Problem) -> None:
        try:
            sets = self._test_sets(problem)
        except ValueError as exc:
            raise ValueError(f"problem {problem.id}: tests: {exc}") from None
        for label, tests in sets:
            try:
                self._spec(tests)
            except ValueError as exc:
                raise ValueError(f"problem {problem.id}: {label} tests: {exc}") from None

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        futures = [self.submit(r, p) for r, p in zip(responses, problems)]
        return [f.result() for f in futures]

    def submit(self, response: str, problem: Problem) -> Future:
        """Score one response asynchronously; returns a Future of `Score`."""
        code = (response if self.extract == "raw" else extract_code(response) if self.extract == "fenced"
                else extract_auto(response, problem.prompt))
        if not code or not code.strip():
            return _done(Score(0.0, False, ("no_code",)))
        try:
            sets = [(label, self._spec(t)) for label, t in self._test_sets(problem)]
        except ValueError as exc:
            return _done(Score(0.0, False, ("bad_tests",), details={"error": str(exc)}))
        if not self.run_visible and len(sets) == 2:
            sets = sets[1:]
        runs = [(label, self._run(code, spec)) for label, spec in sets]
        result: Future = Future()
        pending = [len(runs)]
        lock = threading.Lock()

        def one_done(_: Future) -> None:
            # Finish on the last completion, so no callback ever waits on another job.
            with lock:
                pending[0] -= 1
                last = pending[0] == 0
            if last:
                _finish(result, runs, code, self.reward)
        for _, fut in runs:
            fut.add_done_callback(one_done)
        return result

    def close(self) -> None:
        self.pool.close()

    def _test_sets(self, problem: Problem) -> list[tuple[str, Any]]:
        # Offline rows carry the spec as "tests"; loaders that keep unknown keys in metadata
        # hand it over there when they leave `reference` empty.
        visible = problem.reference
        if visible is None:
            visible = problem.metadata.get("tests")
        if visible is None:
            shipped = shipped_test_sets(problem.prompt, problem.metadata)
            if shipped is not None:
                return shipped
        sets = [("visible", visible)]
        if problem.metadata.get("hidden_tests") is not None:
            sets.append(("hidden", problem.metadata["hidden_tests"]))
        return sets

    def _spec(self, tests: Any) -> TestSpec:
        key = json.dumps(tests, sort_keys=True, default=repr)
        spec = self._specs.get(key)
        if spec is None:
            if len(self._specs) >= self._cache_size:
                self._specs.clear()  # rare: more distinct test sets than cache entries
            spec = self._specs[key] = parse_tests(tests)
        return spec

    def _run(self, code: str, spec: TestSpec) -> Future:
        key = hashlib.sha256(code.encode()).hexdigest() + spec.key + self.reward
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self.counts["cache_hits"] += 1
                return self._cache[key]
            self.counts["jobs"] += 1
            binary = self.reward == "all"
            watch = failure_watch(spec, *self.tols) if binary else None
            job = self.pool.submit(spec.kind, spec.payload(code, stop_on_exc=binary), watch,
                                   spec.check if spec.kind == "check" else None)
            graded: Future = Future()
            job.add_done_callback(lambda f: _set_from(graded, f, spec, self.tols))
            self._cache[key] = graded
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return graded


def _done(score: Score) -> Future:
    f: Future = Future()
    f.set_result(score)
    return f


def _set_from(graded: Future, job: Future, spec: TestSpec, tols: tuple[float, float]) -> None:
    try:
        graded.set_result(grade(spec, job.result(), *tols))
    except Exception:  # a grader bug must not hang the loop: it scores 0, flagged
        graded.set_result(Outcome(0, 1, ("crash",)))


def _finish(result: Future, runs: list, code: str, reward_mode: str) -> None:
    outcomes = {label: fut.result() for label, fut in runs}
    label = "hidden" if "hidden" in outcomes else "visible"
    final: Outcome = outcomes[label]
    passed_all = final.passed == final.total and not final.flags
    reward = float(passed_all) if reward_mode == "all" else final.passed / final.total
    details: dict[str, Any] = {"tests": label, "passed": final.passed, "total": final.total}
    if not passed_all and final.failure:
        details["failure"] = final.failure
    if label == "hidden" and "visible" in outcomes:
        details["visible_passed"] = outcomes["visible"].passed
        details["visible_total"] = outcomes["visible"].total
    result.set_result(Score(reward, passed_all, final.flags, code[:2000], details))


def code_verifier(**options: Any) -> CodeVerifier:
    """The registry's factory: keyword options (`data.verifier_options.code`) are `CodeSpec` fields."""
    return CodeVerifier(CodeSpec(**options))


# the config checks list a verifier's options from its factory's signature: CodeSpec's fields
code_verifier.__signature__ = inspect.signature(CodeSpec)  # type: ignore[attr-defined]
