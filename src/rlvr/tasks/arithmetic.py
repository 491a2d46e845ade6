"""Built-in task: multi-digit addition and subtraction with a written column trace.

`347+285=` is answered `7+5+0=12|4+8+1=13|3+2+1=06|>632`: one block per column, least significant
first, each `a<op>b<op>c=XY` where c is the incoming carry (or borrow) and XY is the outgoing
carry/borrow digit X followed by the column digit Y. The final answer follows the last `>`.
Subtraction problems always have a non-negative result. The trace is what the SFT cold start
imitates; the verifier only looks at the text after the last `>` (strict: exactly the digits of the
answer, no sign games, no second answer).

Train and held-out problems are disjoint by construction: a problem belongs to the held-out split
iff a hash of its text falls in a fixed bucket, so no sampling order can leak one into the other.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from rlvr.types import Problem, Score
from rlvr.tasks.splits import heldout_set, sample_split

ANSWER_MARK = ">"
_NUMBERS = re.compile(r"\d+")
_HELDOUT_BUCKETS = 10  # 1 in 10 problems (by hash) is held out


def is_heldout(text: str) -> bool:
    digest = hashlib.sha256(text.encode()).digest()
    return digest[0] % _HELDOUT_BUCKETS == 0


def solve(a: int, b: int, op: str) -> str:
    """The step-by-step trace plus final answer for `a op b` (the completion, without EOS)."""
    da, db = str(a)[::-1], str(b)[::-1]
    width = max(len(da), len(db))
    carry, blocks, digits = 0, [], []
    for i in range(width):
        x = int(da[i]) if i < len(da) else 0
        y = int(db[i]) if i < len(db) else 0
        if op == "+":
            total = x + y + carry
            new_carry, digit = divmod(total, 10)
        else:
            total = x - y - carry
            new_carry, digit = (1, total + 10) if total < 0 else (0, total)
        blocks.append(f"{x}{op}{y}{op}{carry}={new_carry}{digit}")
        digits.append(str(digit))
        carry = new_carry
    if carry and op == "+":
        digits.append(str(carry))
    answer = "".join(reversed(digits)).lstrip("0") or "0"
    return "|".join(blocks) + f"|{ANSWER_MARK}{answer}"


def make_problem(a: int, b: int, op: str) -> Problem:
    text = f"{a}{op}{b}="
    answer = a + b if op == "+" else a - b
    return Problem(id=text, prompt=text, reference=str(answer), verifier="arithmetic",
                   metadata={"split": "heldout" if is_heldout(text) else "train"})


@dataclass
class ArithmeticTask:
    """Procedural problems with `digits`-digit operands and operators drawn from `ops`."""

    digits: int = 3
    ops: str = "+"
    verifier_options: dict[str, Any] = field(default_factory=dict, compare=False)  # data.verifier_options
    plays_episodes = False

    def _draw(self, rng: random.Random) -> Problem:
        lo, hi = 10 ** (self.digits - 1), 10 ** self.digits - 1
        a, b, op = rng.randint(lo, hi), rng.randint(lo, hi), rng.choice(self.ops)
        if op == "-" and b > a:
            a, b = b, a
        return make_problem(a, b, op)

    def sample(self, rng: random.Random, n: int, split: str = "train") -> list[Problem]:
        """n problems from `split` ("train" or "heldout"), drawn with `rng`."""
        return sample_split(self._draw, rng, n, split)

    def heldout(self, n: int, seed: int = 1234) -> list[Problem]:
        """A fixed held-out set of n distinct problems (the same for every run with this seed)."""
        return heldout_set(self._draw, n, seed)

    def trace(self, problem: Problem) -> str:
        """The reasoner's readable trace for `problem` (used for the SFT cold start)."""
        text = problem.id.rstrip("=")
        op = "-" if "-" in text else "+"
        a, b = text.split(op)
        return solve(int(a), int(b), op)

    def verifiers(self) -> dict[str, Any]:
        from rlvr.tasks.base import build_verifiers

        return build_verifiers({"arithmetic"}, self.verifier_options)

    def train_problems(self) -> list[Problem]:
        return []

    def wrap_engine(self, engine, tokenizer):
        return engine

    def check_tokenizer(self, tokenizer) -> None:
        return None


def from_config(cfg) -> ArithmeticTask:
    """`data.task: arithmetic` (the `rlvr.tasks.base` registry's builder)."""
    return ArithmeticTask(cfg.data.difficulty, cfg.data.ops, dict(cfg.data.verifier_options or {}))


def extract_answer(response: str) -> str | None:
    """The text after the last answer marker, stripped; None when there is no marker."""
    if ANSWER_MARK not in response:
        return None
    return response.rsplit(ANSWER_MARK, 1)[1].strip()


class ArithmeticVerifier:
    """Strict verifier: reward 1 iff the text after the last `>` is exactly the reference digits."""

    name = "arithmetic"

    def __init__(self, **_: object):
        pass

    def check_reference(self, problem: Problem) -> None:
        if not str(problem.reference).isdigit():
            raise ValueError(f"problem {problem.id}: reference {problem.reference!r} is not digits")

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        scores = []
        for response, problem in zip(responses, problems):
            got = extract_answer(response)
            if got is None or got == "":
                scores.append(Score(0.0, False, ("no_answer",), None))
                continue
            ok = got == str(problem.reference)
            flags = () if ok or got.isdigit() else \
                ("multiple_answers",) if len(_NUMBERS.findall(got)) > 1 else ("malformed",)
            scores.append(Score(1.0 if ok else 0.0, ok, flags, got))
        return scores
