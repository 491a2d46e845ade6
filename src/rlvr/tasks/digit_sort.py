"""A second procedural task that shares nothing with arithmetic: sort a string of digits.

`|83152=` is answered `>12358`: the prompt's digits in ascending order (repeats kept) after the
answer mark. There is no carry, no column and no operator, so a skill learnt on arithmetic does not
transfer to it; the experiments use it to watch what training on one skill does to another.
The reasoner writes the answer directly (no intermediate trace). The verifier ("digit_sort") is
strict: exactly the sorted digits after the last `>`, nothing else.

Train and held-out problems are disjoint by the same hash rule as the arithmetic task.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from rlvr.tasks.arithmetic import ANSWER_MARK, extract_answer, is_heldout
from rlvr.tasks.splits import heldout_set, sample_split
from rlvr.types import Problem, Score

PREFIX = "|"


def make_problem(digits: str) -> Problem:
    text = f"{PREFIX}{digits}="
    return Problem(id=text, prompt=text, reference="".join(sorted(digits)), verifier="digit_sort",
                   metadata={"split": "heldout" if is_heldout(text) else "train"})


@dataclass
class DigitSortTask:
    """Problems of `length` random digits (repeats allowed) to sort ascending."""

    length: int = 5

    def _draw(self, rng: random.Random) -> Problem:
        return make_problem("".join(rng.choice("0123456789") for _ in range(self.length)))

    def sample(self, rng: random.Random, n: int, split: str = "train") -> list[Problem]:
        """n problems from `split` ("train" or "heldout"), drawn with `rng`."""
        return sample_split(self._draw, rng, n, split)

    def heldout(self, n: int, seed: int = 1234) -> list[Problem]:
        """A fixed held-out set of n distinct problems (the same for every run with this seed)."""
        return heldout_set(self._draw, n, seed)

    def trace(self, problem: Problem) -> str:
        return ANSWER_MARK + "".join(sorted(str(problem.prompt)[len(PREFIX):-1]))   # a plain-text prompt


class DigitSortVerifier:
    """Reward 1 iff the text after the last `>` is exactly the sorted digits."""

    name = "digit_sort"

    def __init__(self, **_: object):
        pass

    def check_reference(self, problem: Problem) -> None:
        ref = str(problem.reference)
        if not ref.isdigit() or list(ref) != sorted(ref):
            raise ValueError(f"problem {problem.id}: reference {ref!r} is not sorted digits")

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        scores = []
        for response, problem in zip(responses, problems):
            got = extract_answer(response)
            if not got:
                scores.append(Score(0.0, False, ("no_answer",), None))
                continue
            ok = got == str(problem.reference)
            scores.append(Score(1.0 if ok else 0.0, ok, () if ok or got.isdigit() else ("malformed",), got))
        return scores
