"""reasoning-gym as a task source: `data.task: reasoning_gym:NAME[=WEIGHT],NAME...`.

Problems are generated offline by the optional `reasoning-gym` package (`pip install -e '.[gym]'`):
each task NAME is a `reasoning_gym.create_dataset(NAME, **data.task_options[NAME])`. A training
draw picks a task by weight, then an item of that task's training dataset (seeded from the run's
seed); the held-out split is the task's dataset under a fixed held-out seed, and training draws
whose question text is in the held-out set are skipped, so the two splits never share a question.

Scoring: each task's scorer (`dataset.score_answer`) runs in a worker process under a wall-clock
budget (`workers.py`), one call per batch. The answer is the text of the last `<answer>...</answer>`
tag (reasoning-gym's convention), or the whole completion stripped when there is none. By default
the reward is binary (1.0 iff the scorer gives 1.0), because several scorers give partial credit
to wrong answers (the default scorer gives len(gold)/len(answer) to any answer containing the gold
text, so "12" earns 0.5 against "2"); `partial_credit: true` in the task's verifier options keeps
the scorer's value. Each verifier is named `rg.NAME`, so metrics are reported per task.

At build time every exposed task's scorer is audited against its own items (`audit`): the gold
answer must score 1.0, and an empty answer, a junk string and another item's different answer must
score below 1.0. A task that fails is refused with the failed checks named. Not guaranteed: that
a task that passes the audit on its sampled items has a sound scorer on every item.
"""

from __future__ import annotations

import random
from typing import Any, Mapping, Sequence

from rlvr.errors import ConfigError
from rlvr.types import Problem, Score

PREFIX = "reasoning_gym:"
_SIZE = 2**31 - 1          # items are generated lazily from (seed + index); size is only a bound
_HELDOUT_SEED = 20_250_917  # the held-out split: the same for every run
_AUDIT_ITEMS = 30
_JUNK = "zzqx"
_TRAIN_PROBE = 200          # training draws per task checked at build time for held-out overlap


def parse_spec(text: str) -> list[tuple[str, float]]:
    """`reasoning_gym:a=2,b` -> [("a", 2.0), ("b", 1.0)]; ConfigError naming data.task otherwise."""
    body = text[len(PREFIX):]
    out = []
    for part in body.split(","):
        name, _, weight = part.strip().partition("=")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            w = -1.0
        if not name or w <= 0:
            raise ConfigError(f"invalid value {text!r} for data.task; expected "
                              "reasoning_gym:NAME[=WEIGHT],NAME... with weights > 0")
        out.append((name, w))
    return out


def _import():
    try:
        import reasoning_gym
    except ImportError:
        raise ConfigError("data.task: reasoning_gym tasks need the reasoning-gym package "
                          "(pip install -e '.[gym]')") from None
    return reasoning_gym


def create(name: str, config: Mapping[str, Any], seed: int, size: int = _SIZE):
    rg = _import()
    if name not in rg.factory.DATASETS:
        raise ConfigError(f"data.task: unknown reasoning-gym task {name!r}; known: "
                          f"{', '.join(sorted(rg.factory.DATASETS))}")
    try:
        return rg.create_dataset(name, seed=seed, size=size, **dict(config))
    except (TypeError, ValueError, AssertionError) as exc:
        raise ConfigError(f"data.task_options.{name}: {type(exc).__name__}: {exc}") from None


def extract(text: str) -> str:
    """The last `<answer>` tag's content, or the whole text stripped when there is no tag."""
    from reasoning_gym.utils import extract_answer

    got = extract_answer(text)
    return (got if got is not None else text).strip()


def audit(name: str, config: Mapping[str, Any], n: int = _AUDIT_ITEMS) -> dict[str, int]:
    """Counts of items (of n) on which the scorer fails a check: gold < 1.0, or empty / junk /
    another item's different answer scoring 1.0; and `partial_credit`: a wrong answer scored in
    (0, 1). An all-zero result (partial_credit aside) means the scorer passed."""
    ds = create(name, config, _HELDOUT_SEED + 1, n)
    items = [ds[i] for i in range(n)]
    bad = {"gold": 0, "empty": 0, "junk": 0, "wrong": 0, "partial_credit": 0}

    def score(answer: str, entry: dict) -> float:
        try:  # some scorers raise on unparsable answers; in a worker that is reward 0 ("crash")
            return float(ds.score_answer(answer, entry))
        except Exception:  # noqa: BLE001
            return 0.0

    for i, e in enumerate(items):
        other = next((x["answer"] for x in items[i + 1:] + items[:i] if x["answer"] != e["answer"]), None)
        bad["gold"] += score(e["answer"], e) < 1.0
        bad["empty"] += score("", e) >= 1.0
        bad["junk"] += score(_JUNK, e) >= 1.0
        if other is not None:
            s = score(other, e)
            bad["wrong"] += s >= 1.0
            bad["partial_credit"] += 0.0 < s < 1.0
    return bad


def check_sound(name: str, config: Mapping[str, Any]) -> None:
    failed = {k: v for k, v in audit(name, config).items() if v and k != "partial_credit"}
    if failed:
        raise ConfigError(f"data.task: the reasoning-gym scorer of {name!r} fails its own audit on "
                          f"{_AUDIT_ITEMS} items ({', '.join(f'{k}: {v}' for k, v in failed.items())}; "
                          "see docs/tasks/reasoning_gym.md); its rewards would not be ground truth")


class ReasoningGymTask:
    """Weighted reasoning-gym tasks behind the `rlvr.tasks.base.Task` protocol (and `trace`).
    `data.verifier_options` does not apply: each task's verifier options come from its
    `data.task_options` entry (`partial_credit`)."""

    plays_episodes = False

    def __init__(self, spec: str, options: Mapping[str, Any] | None = None, seed: int = 0,
                 heldout_size: int = 500):
        options = dict(options or {})
        self.tasks = parse_spec(spec)
        unknown = sorted(set(options) - {n for n, _ in self.tasks})
        if unknown:
            raise ConfigError(f"data.task_options.{unknown[0]}: not a task named in data.task")
        self.configs = {n: dict(options.get(n) or {}) for n, _ in self.tasks}
        self.verifier_options: dict[str, dict] = {n: {"partial_credit": bool(
            self.configs[n].pop("partial_credit", False))} for n, _ in self.tasks}
        for name, _ in self.tasks:
            check_sound(name, self.configs[name])
        self.train = {n: create(n, self.configs[n], seed) for n, _ in self.tasks}
        self.held = {n: create(n, self.configs[n], _HELDOUT_SEED) for n, _ in self.tasks}
        self._heldout = self.heldout(heldout_size)
        self._held_questions = {p.prompt for p in self._heldout}
        for name, _ in self.tasks:
            self._check_trainable(name)

    def _check_trainable(self, name: str, n: int = _TRAIN_PROBE) -> None:
        """Refuse a task whose training draws are (almost) all held-out questions: a task with few
        distinct questions (caesar_cipher on one short word: ~25) has them all in the held-out
        set, so training would never see it (or, alone, draw forever)."""
        rng = random.Random(f"trainable/{name}")
        fresh = sum(self.train[name][rng.randrange(_SIZE)]["question"] not in self._held_questions
                    for _ in range(n))
        if fresh < n // 10:
            raise ConfigError(
                f"data.task: reasoning_gym task {name!r} has too few distinct questions: {n - fresh} "
                f"of {n} training draws are held-out questions, so training would (almost) never "
                f"draw it; widen data.task_options.{name} or lower data.heldout_size")

    def _problem(self, name: str, entry: dict, index: int, split: str) -> Problem:
        return Problem(id=f"{name}/{split}/{index}", prompt=entry["question"],
                       reference=entry["answer"], verifier=f"rg.{name}",
                       metadata={"split": split, "task": name, "rg_entry": entry})

    def sample(self, rng: random.Random, n: int, split: str = "train") -> list[Problem]:
        if split != "train":
            return self.heldout(n)
        names, weights = [t for t, _ in self.tasks], [w for _, w in self.tasks]
        out: list[Problem] = []
        while len(out) < n:
            name, index = rng.choices(names, weights)[0], rng.randrange(_SIZE)
            entry = self.train[name][index]
            if entry["question"] not in self._held_questions:
                out.append(self._problem(name, entry, index, "train"))
        return out

    def heldout(self, n: int, seed: int = 0) -> list[Problem]:
        """n held-out problems, split evenly over the tasks (the first n % tasks get one more);
        distinct questions. `seed` is accepted for the task interface and ignored."""
        out: list[Problem] = []
        for k, (name, _) in enumerate(self.tasks):
            want = n // len(self.tasks) + (k < n % len(self.tasks))
            seen: set[str] = set()
            index = 0
            while len(seen) < want and index < 50 * want + 100:
                entry = self.held[name][index]
                if entry["question"] not in seen:
                    seen.add(entry["question"])
                    out.append(self._problem(name, entry, index, "heldout"))
                index += 1
        return out

    def trace(self, problem: Problem) -> str:
        """The SFT target: the gold answer in reasoning-gym's answer tag."""
        return f"<answer>{problem.reference}</answer>"

    def verifiers(self) -> dict[str, "ReasoningGymVerifier"]:
        return {f"rg.{n}": ReasoningGymVerifier(task=n, config=self.configs[n], **self.verifier_options[n])
                for n, _ in self.tasks}

    def train_problems(self) -> list[Problem]:
        return []

    def wrap_engine(self, engine, tokenizer):
        return engine

    def check_tokenizer(self, tokenizer) -> None:
        return None


def from_config(cfg) -> ReasoningGymTask:
    """`data.task: reasoning_gym:SPEC` (the `rlvr.tasks.base` registry's builder)."""
    return ReasoningGymTask(cfg.data.task, cfg.data.task_options, cfg.seed, cfg.data.heldout_size)


# ---- scoring in worker processes ----------------------------------------------------------------

_SCORERS: dict[tuple[str, str], Any] = {}


def score_answers(name: str, config: dict, answers: list[str], entry: dict) -> list[float]:
    """Worker entry: the task's own scorer on each extracted answer."""
    key = (name, repr(sorted(config.items())))
    if key not in _SCORERS:
        import reasoning_gym

        _SCORERS[key] = reasoning_gym.create_dataset(name, seed=0, size=1, **config)
    ds = _SCORERS[key]
    return [float(ds.score_answer(a, entry)) for a in answers]


_POOL = None


def _pool():
    global _POOL
    from rlvr.verifiers.workers import WorkerPool

    if _POOL is None or _POOL._closed:
        _POOL = WorkerPool(1, preload=("reasoning_gym",), memory_mb=4096)
    return _POOL


class ReasoningGymVerifier:
    """reasoning-gym's `score_answer` for one task, run in a (shared) worker process."""

    def __init__(self, *, task: str, config: Mapping[str, Any] | None = None,
                 partial_credit: bool = False, timeout_s: float = 10.0):
        self.task, self.config = task, dict(config or {})
        self.name, self.partial_credit, self.timeout_s = f"rg.{task}", partial_credit, timeout_s

    def check_reference(self, problem: Problem) -> None:
        if "rg_entry" not in problem.metadata:
            raise ValueError(f"problem {problem.id}: not a reasoning-gym item (no metadata.rg_entry)")

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        out: list[Score | None] = [None] * len(responses)
        by_problem: dict[str, list[int]] = {}
        for i, p in enumerate(problems):
            by_problem.setdefault(p.id, []).append(i)
        for idx in by_problem.values():
            answers = [extract(responses[i]) for i in idx]
            got = _pool().run(f"{__name__}:score_answers",
                              (self.task, self.config, answers, problems[idx[0]].metadata["rg_entry"]),
                              self.timeout_s)
            for j, i in enumerate(idx):
                if got.status != "ok":
                    out[i] = Score(0.0, False, (got.status,), answers[j])
                    continue
                s = got.value[j]
                reward = s if self.partial_credit else float(s >= 1.0)
                flags = () if answers[j] else ("no_answer",)
                out[i] = Score(reward, s >= 1.0, flags, answers[j])
        return out  # type: ignore[return-value]

    def close(self) -> None:
        if _POOL is not None:
            _POOL.close()
