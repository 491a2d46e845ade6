"""The code verifier reads unfenced answers (raw MBPP code, HumanEval body continuations) and says
why a failing answer failed (issue 30)."""

import pytest

from rlvr.types import Problem
from rlvr.verifiers.base import get_verifier
from rlvr.verifiers.code import extract_auto
from rlvr.verifiers.sandbox import probe

PROMPT = 'def add(a, b):\n    """Return a + b."""\n'
BODY = "    return a + b\n"
CASES = {"entry_point": "add", "cases": [{"args": [1, 2], "expected": 3}, {"args": [2, 2], "expected": 4}]}


def test_auto_extraction_takes_fences_raw_code_and_continuations_but_not_prose():
    assert extract_auto("```python\nx = 1\n```\nthen ```\ny = 2\n```") == "y = 2"
    assert extract_auto("def add(a, b):\n    return a + b\n") == "def add(a, b):\n    return a + b\n"
    assert extract_auto(BODY, PROMPT) == PROMPT + BODY                   # HumanEval: prompt + body
    assert extract_auto("The answer is to add them.", PROMPT) is None
    assert extract_auto("hello", "Write a function.") is None            # a bare name is no code
    assert extract_auto("", PROMPT) is None


@pytest.fixture(scope="module")
def verifier():
    if probe().tier not in ("bwrap", "landlock"):
        pytest.skip("no isolation tier on this machine")
    v = get_verifier("code", timeout_s=3.0, workers=1)
    yield v
    v.close()


def test_unfenced_code_and_continuations_score_by_default(verifier):
    mbpp = Problem("m", "Write a function add(a, b).", CASES, "code")
    human_eval = Problem("h", PROMPT, CASES, "code")
    scores = verifier.score_batch(["def add(a, b):\n    return a + b", BODY, "I would add them."],
                                  [mbpp, human_eval, mbpp])
    assert [s.reward for s in scores] == [1.0, 1.0, 0.0]
    assert scores[2].flags == ("no_code",)


def test_a_failing_answer_says_which_case_failed_and_how(verifier):
    p = Problem("f", "", CASES, "code")
    wrong, crash, broken = verifier.score_batch(
        ["def add(a, b):\n    return a - b", "def add(a, b):\n    return a / 0",
         "```python\ndef add(a, b):\n  return (\n```"], [p, p, p])
    assert (wrong.details["passed"], wrong.details["total"]) == (0, 2)
    assert wrong.details["failure"]["case"] == 0 and wrong.details["failure"]["input"] == "(1, 2)"
    assert (wrong.details["failure"]["expected"], wrong.details["failure"]["got"]) == ("3", "-1")
    assert crash.details["failure"]["got"] == "raised ZeroDivisionError"
    assert broken.details["failure"]["error"] == "the code did not load: SyntaxError"
