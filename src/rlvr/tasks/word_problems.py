"""Built-in task: addition and subtraction asked in words, as chat messages, for real instruct models.

"Lena had 73 stickers and gave 28 of them away. How many stickers does Lena have left? Put the final
answer in \\boxed{}." Each problem is one user message (the tokenizer's chat template applies), its
reference the number, its verifier `math` (which reads a boxed answer, or one stated in prose).

What the held-out split measures is the skill, not the wording: the held-out problems use question
wordings (templates) that training never shows, with names and objects of their own, and operand
pairs that no training problem has (a hash of the pair decides, as in `rlvr.tasks.arithmetic`). A
policy that only learned the training phrasings, or memorised answers, does not gain there.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from typing import Any

from rlvr.tasks.splits import heldout_set, sample_split
from rlvr.types import Problem

# (operator, template); {a} {b} operands (a >= b for "-"), {n} a name, {it} a plural object.
TRAIN_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("+", "What is {a} + {b}?"),
    ("-", "Compute {a} - {b}."),
    ("+", "{n} has {a} {it}. {n} gets {b} more. How many {it} does {n} have now?"),
    ("-", "{n} had {a} {it} and gave {b} of them away. How many {it} does {n} have left?"),
    ("+", "Find the sum of {a} and {b}."),
    ("-", "What do you get if you take {b} away from {a}?"),
    ("+", "One box holds {a} {it} and another holds {b}. How many {it} are in both boxes?"),
    ("-", "There were {a} {it} on a shelf. {b} were taken. How many {it} remain?"),
)
HELDOUT_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("+", "Add {a} and {b}. What is the total?"),
    ("-", "How much is {a} minus {b}?"),
    ("+", "{n} scored {a} points in the first game and {b} in the second. How many points did {n} "
          "score in all?"),
    ("-", "A train carried {a} passengers. At the station {b} got off. How many passengers are still "
          "on the train?"),
)
TRAIN_NAMES = ("Tom", "Mia", "Ravi", "Lena", "Omar", "Sofia", "Ken", "Ada")
HELDOUT_NAMES = ("Priya", "Jonas", "Amara", "Luis")
TRAIN_THINGS = ("apples", "stickers", "marbles", "books", "coins", "pencils")
HELDOUT_THINGS = ("shells", "cards", "buttons")
ANSWER_INSTRUCTION = " Put the final answer in \\boxed{}."
_HELDOUT_BUCKETS = 5   # 1 in 5 operand pairs (by hash) is held out


def pair_is_heldout(a: int, b: int, op: str) -> bool:
    return hashlib.sha256(f"{a}{op}{b}".encode()).digest()[0] % _HELDOUT_BUCKETS == 0


@dataclass
class WordProblemsTask:
    """Problems with `digits`-digit operands and operators drawn from `ops`."""

    digits: int = 2
    ops: str = "+-"
    verifier_options: dict[str, Any] = field(default_factory=dict, compare=False)
    plays_episodes = False

    def _draw(self, rng: random.Random) -> Problem:
        heldout = rng.random() < 0.5
        templates = [t for t in (HELDOUT_TEMPLATES if heldout else TRAIN_TEMPLATES) if t[0] in self.ops]
        op, template = rng.choice(templates)
        lo, hi = 10 ** (self.digits - 1), 10 ** self.digits - 1
        a, b = rng.randint(lo, hi), rng.randint(lo, hi)
        if op == "-" and b > a:
            a, b = b, a
        name = rng.choice(HELDOUT_NAMES if heldout else TRAIN_NAMES)
        thing = rng.choice(HELDOUT_THINGS if heldout else TRAIN_THINGS)
        text = template.format(a=a, b=b, n=name, it=thing) + ANSWER_INSTRUCTION
        split = "heldout" if heldout else "train"
        if pair_is_heldout(a, b, op) != heldout:
            split = "neither"   # a held-out pair in a training wording, or the reverse: never drawn
        return Problem(id=text, prompt=[{"role": "user", "content": text}],
                       reference=str(a + b if op == "+" else a - b), verifier="math",
                       metadata={"split": split, "template": template})

    def sample(self, rng: random.Random, n: int, split: str = "train") -> list[Problem]:
        return sample_split(self._draw, rng, n, split)

    def heldout(self, n: int, seed: int = 1234) -> list[Problem]:
        return heldout_set(self._draw, n, seed)

    def verifiers(self) -> dict[str, Any]:
        from rlvr.tasks.base import build_verifiers

        return build_verifiers({"math"}, self.verifier_options)

    def train_problems(self) -> list[Problem]:
        return []

    def wrap_engine(self, engine, tokenizer):
        return engine

    def check_tokenizer(self, tokenizer) -> None:
        from rlvr.errors import ConfigError

        if getattr(tokenizer, "chat_template", None) is None:
            raise ConfigError("data.task: word_problems asks in chat messages; model.path must have a "
                              "tokenizer with a chat template (an instruct model)")


def from_config(cfg) -> WordProblemsTask:
    """`data.task: word_problems` (the registry's builder); data.difficulty is the operand digits."""
    return WordProblemsTask(cfg.data.difficulty, cfg.data.ops, dict(cfg.data.verifier_options or {}))


def lenient_correct(response: str, reference: str) -> bool:
    """The last integer in the response equals the reference: a check that ignores the answer's format
    (no box, no phrase), so a gain under it is arithmetic, not formatting."""
    numbers = re.findall(r"-?\d+", response.replace(",", ""))
    return bool(numbers) and numbers[-1] == str(reference)

