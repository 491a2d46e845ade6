"""Math verifier: extraction policies, the exact fast path, flags, caching, batching, references."""

from __future__ import annotations

from fractions import Fraction

import pytest

from rlvr.types import Problem
from rlvr.verifiers import get_verifier
from rlvr.verifiers.math import MathVerifier
from rlvr.verifiers.math.extract import extract_candidates, final_region, split_parts
from rlvr.verifiers.math.fast import fast_equal, to_number


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(timeout_s=2.0)
    yield v
    v.close()


@pytest.mark.parametrize("text,policy,expected", [
    ("so \\boxed{3}", "boxed", ["3"]),
    ("\\boxed{\\boxed{3}} and \\fbox{4}", "boxed", ["3", "4"]),  # one run of boxes: a list
    ("\\boxed{\\boxed{3}} then \\fbox{4}", "boxed", ["4"]),  # prose between: the last box
    ("<answer> $x = 2$ </answer>", "answer_tag", ["x = 2"]),
    ("<answer>so \\boxed{7}</answer>", "answer_tag", ["7"]),
    ("We get 5. The answer is $12$.\nDone", "phrase", ["12"]),
    ("**Answer:** 6", "phrase", ["6"]),
    ("$\\frac{1}{2}$", "whole", ["\\frac{1}{2}"]),
    ("  0.5. ", "whole", ["0.5"]),
    ("<think>\\boxed{1}</think><answer>2</answer> \\boxed{3}", "auto", ["2"]),
    ("<think>\\boxed{1}</think> \\boxed{3}", "auto", ["3"]),
    ("x = 3", "auto", ["x = 3"]),
    ("I have no idea what to say here", "auto", []),
    ("<think>never closed \\boxed{4}", "auto", []),
])
def test_extraction_policies(text, policy, expected):
    assert extract_candidates(text, policy)[0] == expected


def test_final_region_is_after_the_last_think_close():
    assert final_region("<think>a</think>b</think>c") == "c"
    assert final_region("<think>open") == ""
    assert final_region("plain") == "plain"


@pytest.mark.parametrize("answer,parts", [
    ("3 or 4", ["3", "4"]), ("3, 4", ["3", "4"]), ("1,000", ["1000"]), ("1{,}000", ["1000"]),
    ("(1, 2)", ["(1, 2)"]), ("\\{1, 2\\}", ["\\{1, 2\\}"]), ("3 \\text{ or } 4", ["3", "4"]),
    ("\\begin{pmatrix}1, 2\\end{pmatrix}", ["\\begin{pmatrix}1, 2\\end{pmatrix}"]),
    ("x \\land y", ["x \\land y"]), ("ordinal", ["ordinal"]),
])
def test_split_parts(answer, parts):
    assert split_parts(answer) == parts


@pytest.mark.parametrize("text,value", [
    ("1,234", Fraction(1234)), ("-\\frac{3}{4}", Fraction(-3, 4)), ("\\dfrac{10}{4}", Fraction(5, 2)),
    ("\\$18.90", Fraction(189, 10)), ("12\\%", Fraction(12)), ("5 \\text{ cm}", Fraction(5)),
    ("1.5 \\times 10^{3}", Fraction(1500)), ("2e-3", Fraction(1, 500)), ("0.1\\overline{6}", Fraction(1, 6)),
    ("30^\\circ", Fraction(30)), ("x = -2", Fraction(-2)), ("7/0", None), ("\\sqrt{2}", None), ("5x", None),
])
def test_to_number(text, value):
    number = to_number(text)
    assert (number.value if number else None) == value


@pytest.mark.parametrize("pred,ref,verdict", [
    ("0.5", "\\frac{1}{2}", True), ("0.333333", "\\frac13", True), ("0.333", "\\frac13", False),
    ("3.0000001", "3", False), ("50\\%", "0.5", True), ("50\\%", "50", True), ("5\\%", "0.5", False),
    ("(0, 1]", "(0,1]", True), ("(0, 1)", "[0, 1]", False), ("\\{3, 1\\}", "\\{1, 3\\}", True),
    ("\\sqrt{2}", "1.41", None), ("x = 3", "y = 3", None),
])
def test_fast_equal(pred, ref, verdict):
    assert fast_equal(pred, ref) == verdict


def test_correct_answer_gets_reward_one(verifier):
    score = verifier.score("Reasoning... so the answer is \\boxed{\\frac{1}{2}}.", "0.5")
    assert (score.reward, score.correct, score.flags, score.extracted) == (1.0, True, (), "\\frac{1}{2}")


def test_no_answer_and_multiple_answers_are_flagged(verifier):
    assert verifier.score("I could not solve it.", "3").flags == ("no_answer",)
    assert verifier.score("\\boxed{3} or maybe \\boxed{4}", "3").flags == ("multiple_answers",)
    assert verifier.score("\\boxed{3} so \\boxed{3.0}", "3").correct  # the same value twice is one answer


def test_list_answers_are_fine_when_the_reference_is_a_list(verifier):
    assert verifier.score("\\boxed{3, -1}", "-1, 3").correct
    assert verifier.score("\\boxed{-1} and \\boxed{3}", "-1, 3").correct


def test_symbolic_answers_go_to_math_verify(verifier):
    score = verifier.score("\\boxed{\\sqrt{18}}", "3\\sqrt{2}")
    assert score.correct and score.details["path"] == "symbolic"


def test_per_problem_extraction_policy(verifier):
    problems = [Problem("a", "", "2", metadata={"extract": "answer_tag"}), Problem("b", "", "2")]
    scores = verifier.score_batch(["\\boxed{2}"] * 2, problems)
    assert [s.flags for s in scores] == [("no_answer",), ()]


def test_group_is_deduplicated_and_cached(verifier):
    response = "\\boxed{\\frac{\\pi}{3}}"
    group = [response] * 8
    scores = verifier.score_batch(group, [Problem("p", "", "\\frac{1}{3}\\pi")] * 8)
    assert all(s.correct for s in scores) and len({id(s) for s in scores}) == 1
    again = verifier.score(response, "\\frac{1}{3}\\pi")
    assert again.correct and again.details["path"] == "cache"


def test_check_reference_rejects_unusable_references(verifier):
    verifier.check_reference(Problem("ok1", "", "\\frac{1}{2}"))
    verifier.check_reference(Problem("ok2", "", 42))
    for bad in ("", None, "   ", ["a"]):
        with pytest.raises(ValueError, match="problem bad"):
            verifier.check_reference(Problem("bad", "", bad))
    with pytest.raises(ValueError, match="unknown extract policy"):
        verifier.check_reference(Problem("bad", "", "1", metadata={"extract": "first"}))


def test_bad_reference_is_never_a_reward(verifier):
    assert verifier.score_batch(["\\boxed{1}"], [Problem("x", "", None)])[0].flags == ("bad_reference",)


def test_registry_builds_the_math_verifier():
    v = get_verifier("math", extract="boxed", timeout_s=1)
    assert v.name == "math" and v.extract == "boxed"
    with pytest.raises(ValueError):
        MathVerifier(extract="nonsense")
