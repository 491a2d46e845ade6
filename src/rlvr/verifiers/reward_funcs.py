"""TRL reward functions, unchanged, as a verifier: called the way TRL's `GRPOTrainer` calls them.

A reward function written for TRL (`def f(prompts, completions, **kwargs) -> list[float | None]`)
is called once per batch of completions with keyword arguments, as `GRPOTrainer._calculate_rewards`
does (TRL 1.x):

  prompts          the problems' prompts: strings, or chat-message lists
  completions      strings; or, when the prompts are messages, `[{"role": "assistant", "content": text}]`
  completion_ids   the completion token ids exactly as sampled (lists of ints)
  <column>=[...]   every other dataset column: the row's reference under the name it had in the file
                   (`answer`, `solution`, `reference`, `tests`) and every extra column
  trainer_state    None (rlvr has no `transformers.TrainerState`; functions that read it must cope)
  log_extra, log_metric   callables that accept what TRL's accept and discard it

`None` in the returned list means "not applicable": as in TRL, it counts as NaN and the weighted sum
over functions skips it (`nansum`). Where every term of a completion is None, TRL gives the
completion a NaN reward and advantage 0; here it gets reward 0.0 and the flag `unscorable`
(rlvr's rewards are floats), which differs from TRL in that the completion still enters its
group's mean.

`RewardFunctionsVerifier(terms=[...])` mixes functions and built-in verifiers, each with a weight:
`{"fn": "my_rewards.py:accuracy", "weight": 1.0}`, `{"fn": "trl.rewards:accuracy_reward"}`,
`{"fn": "trl.rewards:get_soft_overlong_punishment", "init": {"max_completion_len": 48,
"soft_punish_cache": 8}}` (`init` calls a factory to get the function), `{"verifier": "math"}`.
Functions are user code: they run in worker processes (`workers.py`) under a wall-clock budget
(`timeout_s` per batch); a function that raises, returns the wrong length or overruns gives its
term 0 for that batch with the flag `crash` or `timeout`, and never stops the run. `correct` comes
from the term marked `primary: true` (else the first): a verifier's own verdict, or reward > 0.
Not guaranteed: isolation beyond a separate process with an address-space cap (no sandbox).
"""

from __future__ import annotations

import importlib
import importlib.util
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

# the terms' schema is config, checked when a config loads: `rlvr.config.checks` owns it
from rlvr.config.checks import FN_SPEC, check_terms  # noqa: F401  (FN_SPEC: re-exported)
from rlvr.types import Problem, Score
from rlvr.verifiers.service import Rows, ServiceTerm, join_rows
from rlvr.verifiers.trl_call import await_if_needed, check_rewards, combine, discard, trl_kwargs

NAME = "reward_funcs"


# ---- worker side: load and call user functions --------------------------------------------------

_LOADED: dict[tuple[str, str], Callable[..., Any]] = {}


def _import_target(target: str):
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {target}")
        spec = importlib.util.spec_from_file_location(f"rlvr_reward_{abs(hash(str(path)))}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {target} as a module")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(target)


def resolve(fn_spec: str) -> Any:
    """The attribute named by `module:attr` or `path/to/file.py:attr`, imported now (uncached).
    Also used for `data.task: verifiers:SPEC` (`rlvr.agents.vftask`)."""
    target, _, attr = fn_spec.rpartition(":")
    return getattr(_import_target(target), attr)


def load_function(fn_spec: str, init: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """The callable named by `module:attr` or `file.py:attr` (a factory called with `init`)."""
    key = (fn_spec, repr(sorted((init or {}).items())))
    if key not in _LOADED:
        fn = resolve(fn_spec)
        if init is not None:
            fn = fn(**init)
        if not callable(fn):
            raise TypeError(f"{fn_spec} is not callable")
        _LOADED[key] = fn
    return _LOADED[key]


def probe_function(fn_spec: str, init: Mapping[str, Any] | None) -> str | None:
    """Worker entry for build-time validation: None, or why the function cannot be loaded."""
    try:
        load_function(fn_spec, init)
        return None
    except BaseException as exc:  # noqa: BLE001 - any import failure is reported, not raised
        return f"{type(exc).__name__}: {exc}"[:500]


def call_function(fn_spec: str, init: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> Any:
    """Worker entry: call the function as TRL does; the checked list of rewards, or an error."""
    fn = load_function(fn_spec, init)
    kwargs = dict(kwargs, log_extra=discard, log_metric=discard)
    try:
        return ("ok", check_rewards(await_if_needed(fn(**kwargs)), len(kwargs["completions"])))
    except Exception as exc:  # noqa: BLE001 - user code: the verdict is `crash`
        return ("error", f"{type(exc).__name__}: {exc}"[:500], traceback.format_exc()[-4000:])


# ---- parent side: the verifier ------------------------------------------------------------------

_CALL = "rlvr.verifiers.reward_funcs:call_function"
_PROBE = "rlvr.verifiers.reward_funcs:probe_function"


class _FunctionTerm:
    def __init__(self, term: Mapping[str, Any], pool):
        self.spec, self.pool = term["fn"], pool
        self.init = dict(term["init"]) if "init" in term else None
        self.timeout_s = float(term.get("timeout_s", 30.0))
        self.name = term.get("name") or self.spec.rpartition(":")[2]
        self.verifier = None
        self.chunks = 1   # calls per batch, each in its own worker (set by the verifier)

    def check(self, where: str) -> None:
        out = self.pool.run(_PROBE, (self.spec, self.init), max(60.0, self.timeout_s))
        error = out.value if out.status == "ok" else f"loading it did not finish ({out.status})"
        if error:
            raise ValueError(f"{where}.fn: cannot load {self.spec!r}: {error}")

    def rewards(self, responses, problems, token_ids) -> Rows:
        """The batch cut into `chunks` contiguous calls that run at once, one worker each (TRL
        shards a batch across processes the same way); a failed call zeroes its rows only."""
        n = len(responses)
        bounds = [(n * i // self.chunks, n * (i + 1) // self.chunks) for i in range(self.chunks)]
        bounds = [(a, b) for a, b in bounds if b > a]
        with ThreadPoolExecutor(len(bounds)) as ex:
            parts = list(ex.map(lambda ab: self._call(responses[ab[0]:ab[1]], problems[ab[0]:ab[1]],
                                                      None if token_ids is None else token_ids[ab[0]:ab[1]]),
                                bounds))
        return join_rows(parts)

    def _call(self, responses, problems, token_ids) -> Rows:
        out = self.pool.run(_CALL, (self.spec, self.init, trl_kwargs(responses, problems, token_ids)),
                            self.timeout_s)
        if out.status == "ok" and out.value[0] == "ok":
            return out.value[1], [()] * len(responses), {}
        flag = "timeout" if out.status == "timeout" else "crash"
        if out.status == "ok":
            error, tb = out.value[1], out.value[2] if len(out.value) > 2 else ""
        elif flag == "timeout":
            error, tb = f"no result within timeout_s={self.timeout_s:g} s", ""
        else:
            error, tb = f"the worker process died ({out.value or out.status})", ""
        return [0.0] * len(responses), [(flag,)] * len(responses), {"error": error, "traceback": tb,
                                                                    "flag": flag}


class _VerifierTerm:
    def __init__(self, term: Mapping[str, Any]):
        from rlvr.verifiers.base import get_verifier

        self.verifier = get_verifier(term["verifier"], **dict(term.get("options") or {}))
        self.name = term.get("name") or self.verifier.name

    def check(self, where: str) -> None:
        return None

    def rewards(self, responses, problems, token_ids) -> tuple[list[Score], list[tuple[str, ...]], dict]:
        from rlvr.verifiers.base import score_with_ids

        scores = (score_with_ids(self.verifier, responses, problems, token_ids) if token_ids is not None
                  else self.verifier.score_batch(responses, problems))   # ids: token-length terms
        # a verifier that calls out (a judge) reports a failed call as the term's error
        errors = [(s.details or {}).get("term_error") for s in scores]
        flags: list[tuple[str, ...]] = [(str(e["flag"]),) if e else () for e in errors]
        return scores, flags, next((e for e in errors if e), {})


class RewardFunctionsVerifier:
    """Weighted TRL reward functions and built-in verifiers, combined as TRL combines them."""

    name = NAME
    takes_token_ids = True  # score_groups passes the sampled token ids as `completion_ids`

    def __init__(self, *, terms: Sequence[Mapping[str, Any]], workers: int = 1,
                 memory_mb: int = 8192, key: str = "data.reward_funcs"):
        from rlvr.verifiers.workers import WorkerPool

        check_terms(terms, key)
        if not terms:
            raise ValueError(f"{key}: give at least one reward function or verifier")
        self.pool = WorkerPool(workers, memory_mb=memory_mb)
        self.terms: list[Any] = [_FunctionTerm(t, self.pool) if "fn" in t else ServiceTerm(t)
                                 if "service" in t else _VerifierTerm(t) for t in terms]
        functions = [t for t in self.terms if isinstance(t, _FunctionTerm)]
        for f in functions:   # never more calls at once than workers: a step costs one timeout_s
            f.chunks = max(1, self.pool.size // len(functions))
        names = [t.name for t in self.terms]
        for i, t in enumerate(self.terms):  # TRL-style metric names must be unique
            if names.count(t.name) > 1:
                t.name = f"{t.name}_{i}"
        self.weights = [float(t.get("weight", 1.0)) for t in terms]
        self.model_terms = [t.name for t in self.terms if getattr(t.verifier, "judged_by_model", False)]
        marked = [i for i, t in enumerate(terms) if t.get("primary")]
        self.primary = marked[0] if marked else 0
        for i, t in enumerate(self.terms):
            t.check(f"{key}[{i}]")

    def check_reference(self, problem: Problem) -> None:
        for t in self.terms:
            if t.verifier is not None:
                t.verifier.check_reference(problem)

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem],
                    token_ids: Sequence[Sequence[int]] | None = None) -> list[Score]:
        args = (list(responses), list(problems), token_ids)
        with ThreadPoolExecutor(len(self.terms)) as ex:   # terms at once; a function's calls too
            results = list(ex.map(lambda t: t.rewards(*args), self.terms))
        per_term = [[s.reward if isinstance(s, Score) else s for s in r] for r, _, _ in results]
        errors = {t.name: e for t, (_, _, e) in zip(self.terms, results) if e}
        total = combine(per_term, self.weights)
        out = []
        for i, reward in enumerate(total):
            primary = results[self.primary][0][i]
            correct = primary.correct if isinstance(primary, Score) else bool(primary and primary > 0)
            failed = {t.name: errors[t.name] for t, (_, f, _) in zip(self.terms, results) if f[i]}
            row_flags = tuple(dict.fromkeys([x for _, f, _ in results for x in f[i]]
                                            + (["unscorable"] if reward is None else [])))
            details: dict[str, Any] = {"terms": {t.name: r[i] for t, r in zip(self.terms, per_term)},
                                       "weights": {t.name: w for t, w in zip(self.terms, self.weights)}}
            if self.model_terms:   # the doctor's judge_rise alarm sets these against the others
                details["model_terms"] = self.model_terms
            if failed:   # the run log reports each term's first error (`rlvr.monitor.crashes`)
                details["error"] = "; ".join(f"{n}: {e['error']}" for n, e in failed.items())[:500]
                details["term_errors"] = failed
            out.append(Score(0.0 if reward is None else reward, correct, row_flags, None, details))
        return out

    def close(self) -> None:
        self.pool.close()
        for t in self.terms:
            if t.verifier is not None:
                getattr(t.verifier, "close", lambda: None)()
