"""experiments/public_math: the cold start's worked solutions are right, and neither they nor the
training files ever hold a held-out problem (MAWPS sets share problems across files)."""

from __future__ import annotations

import json
import re

import pytest

from experiments.public_math import INSTRUCTION, SETS, sft_rows, split, worked


@pytest.mark.parametrize("equation, lines, value", [
    ("X=((32.0+42.0)-35.0)", ["32 + 42 = 74.", "74 - 35 = 39."], 39),
    ("X = 70 - 27", ["70 - 27 = 43."], 43),
    ("70-x=27", ["70 - x = 27, so x = 70 - 27.", "70 - 27 = 43."], 43),
    ("12=x+4", ["x + 4 = 12, so x = 12 - 4.", "12 - 4 = 8."], 8),
    ("79-(9*x)=16", ["79 - (9 * x) = 16, so x = (79 - 16) / 9.", "79 - 16 = 63.", "63 / 9 = 7."], 7),
    ("45/x=9", ["45 / x = 9, so x = 45 / 9.", "45 / 9 = 5."], 5),
    ("x/5=3", ["x / 5 = 3, so x = 3 * 5.", "3 * 5 = 15."], 15),
    ("x-3-6=9", ["(x - 3) - 6 = 9, so x = (9 + 6) + 3.", "9 + 6 = 15.", "15 + 3 = 18."], 18),
])
def test_worked_solutions_isolate_the_unknown_then_compute(equation, lines, value):
    assert worked(equation) == (lines, value)


@pytest.mark.parametrize("equation", ["3+4=7", "x=x+1", "x*x=4", "x=abs(3)", "abs(x)=3", "y+1=3",
                                      "x+y=3", "x=-3"])
def test_equations_it_cannot_work_are_refused(equation):
    with pytest.raises(ValueError):
        worked(equation)


def _mawps(i: int, question: str) -> dict:
    return {"iIndex": i, "sQuestion": question, "lEquations": [f"X=({i}.0+1.0)"], "lSolutions": [i + 1.0]}


def test_no_held_out_problem_reaches_training_or_the_cold_start(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    (data / "gsm8k").mkdir(parents=True)
    (data / "mawps").mkdir()
    (data / "gsm8k" / "train.jsonl").write_text("".join(json.dumps(
        {"question": f"Sam has {i} pens and buys 1. How many?",
         "answer": f"{i}+1 = <<{i}+1={i + 1}>>{i + 1}\n#### {i + 1}"})
        + "\n" for i in range(40)))
    shared = [f"Ann has {i} apples and finds 1 more . How many apples ?" for i in range(40)]
    for name in ("MultiArith", "AddSub", "SingleEq"):   # the same problems in every set, as MAWPS ships some
        (data / "mawps" / f"{name}.json").write_text(json.dumps([_mawps(i, q) for i, q in enumerate(shared)]))
    split(data, out, heldout=10, seed=0)
    kept = sft_rows(out, gsm8k=20)
    assert kept["dropped"] == 0 and kept["gsm8k"] == 20
    held = {json.loads(line)["prompt"] for name in SETS
            for line in (out / "data" / f"held_{name}.jsonl").read_text().splitlines()}
    assert len(held) > 10   # the three MAWPS sets hold out different problems: all leave all three
    rows = [json.loads(line) for line in (out / "data" / "sft.jsonl").read_text().splitlines()]
    assert rows and not {r["prompt"][0]["content"] for r in rows} & held
    for name in ("multiarith", "addsub", "singleeq"):
        train = json.loads((out / "data" / f"{name}.json").read_text())
        assert train and not {r["sQuestion"].strip() + INSTRUCTION for r in train} & held
    for r in rows:
        m = re.match(r"Ann has (\d+) ", r["prompt"][0]["content"])
        if m:
            n = int(m.group(1))
            assert r["completion"] == f"{n} + 1 = {n + 1}.\nThe answer is \\boxed{{{n + 1}}}."
    gsm = [r for r in rows if r["prompt"][0]["content"].startswith("Sam")]
    assert len(gsm) == 20 and all("<<" not in r["completion"] for r in gsm)
