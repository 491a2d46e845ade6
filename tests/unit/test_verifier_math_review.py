"""Regression cases from the blind review of issue 17: shapes of real model outputs that the math
verifier used to misread, each named after its cause. Each must score as stated with default options.
"""

from __future__ import annotations

import pytest

from rlvr.types import Problem
from rlvr.verifiers.math import MathVerifier

# (cause, reference, response, expected reward)
CASES = [
    # 1. an escaped dollar inside math is currency, not the end of the math
    ("escaped_dollar", "18", "Janet sells 9 eggs at $\\$2$ each.\n#### 18", 1),
    ("escaped_dollar", "4.5", "The cost per pound is $\\$9 / 2$. Therefore it costs $\\$4.50$ per pound.", 1),
    ("escaped_dollar", "1250", "The total cost is 250 * 5. The total cost is $\\$1,250$.", 1),
    ("escaped_dollar", "12", "It costs $\\$3 \\times 4 = \\$12$.", 1),
    # 2. a plain dollar before a number is currency; `#### N` marks the final answer
    ("currency_dollar", "35", "He spent $20 on lunch and $15 on dinner. In total he spent $35.", 1),
    ("currency_dollar", "75", "She earned $45 on Monday and $30 on Tuesday, so she earned $75 in total.\n#### 75", 1),
    ("gsm8k_marker", "10", "She has $3 \\times 4 = 12$ apples. After eating 2, she has $12 - 2 = 10$ left.\n#### 10", 1),
    ("gsm8k_marker", "10", "She has $3 \\times 4 = 12$ apples. After eating 2, she has $12 - 2 = 10$ left.\n#### 11", 0),
    # 3. no marker: the last sentence is the answer, a plain number in it included
    ("last_sentence", "10", "We have $a=2$. So the total is 10.", 1),
    ("last_sentence", "10", "The sum is 10.", 1),
    ("last_sentence", "10", "First $x=2$.\n\nThe sum is 10.", 1),
    ("last_sentence", "10", "Thus $y = 3$. Hence $z = 10$.", 1),
    ("last_sentence", "10", "First, $3 \\times 4 = 12$. Then $12 - 2 = 10$.", 1),
    ("last_sentence", "10", "We add $4$ and $6$. The sum is 10.", 1),
    ("last_sentence", "2000", "Each lap is $400$ m and she runs $5$ laps. She runs 2000 meters.", 1),
    ("last_sentence", "6", "We have $x = 3$. Therefore the value of $2x$ is 6.", 1),
    ("last_sentence", "25", "The discount is $\\frac{15}{60} = 0.25$. So the discount is 25%.", 1),
    ("last_sentence", "15", "We found $a = 7$ and $b = 8$. So $a + b = 7 + 8 = 15$.", 1),
    ("last_sentence", "6, 8", "Factoring, $(x-6)(x-8) = 0$. The solutions are $x = 6$ and $x = 8$.", 1),
    ("last_sentence", "1, 5", "The quadratic has discriminant $16$. The roots are $x = 1$ and $x = 5$.", 1),
    ("last_sentence", "10", "If we add 4 and 6, we get 10.", 1),
    ("last_sentence", "10", "When $x = 2$, we get $y = 10$.", 1),
    ("last_sentence", "11", "We have $a=2$. So the total is 10.", 0),
    # 4. several boxes: the last run of boxes counts; a connective between them is a hedge
    ("last_box", "14", "So $x = \\boxed{7}$. Then $y = 2x = 14$, and the question asks for $y$. "
                       "So the final answer is $\\boxed{14}$.", 1),
    ("last_box", "16", "Solving, $x = \\boxed{4}$, and therefore $x^2 = \\boxed{16}$.", 1),
    ("last_box", "-1, 3", "$x = \\boxed{-1}$ and $x = \\boxed{3}$", 1),
    ("last_box", "4", "Solving, $x = \\boxed{4}$, and therefore $x^2 = \\boxed{16}$.", 0),
    # 5. a `\pm` inside a fraction, in the reference or the answer
    ("pm_in_frac", "\\frac{3 \\pm \\sqrt{5}}{2}", "The answer is $\\boxed{\\frac{3 \\pm \\sqrt{5}}{2}}$.", 1),
    ("pm_in_frac", "\\frac{3 \\pm \\sqrt{5}}{2}", "The answer is $\\boxed{x = \\frac{3 \\pm \\sqrt{5}}{2}}$.", 1),
    ("pm_in_frac", "\\frac{3 \\pm \\sqrt{5}}{2}",
     "So $\\boxed{\\frac{3+\\sqrt{5}}{2}, \\frac{3-\\sqrt{5}}{2}}$.", 1),
    ("pm_in_frac", "\\frac{-1+\\sqrt5}{2}, \\frac{-1-\\sqrt5}{2}", "So $\\boxed{\\frac{-1 \\pm \\sqrt{5}}{2}}$.", 1),
    ("pm_in_frac", "\\frac{3 \\pm \\sqrt{5}}{2}", "So $\\boxed{\\frac{3 \\pm \\sqrt{7}}{2}}$.", 0),
    # 7. an inequality against an interval, decided in-process (no load-dependent timeout)
    ("inequality", "(3, \\infty)", "Therefore, the final answer is $\\boxed{x > 3}$.", 1),
    ("inequality", "[3, \\infty)", "Therefore, the final answer is $\\boxed{x \\geq 3}$.", 1),
    ("inequality", "(-2,5)", "Therefore, the final answer is $\\boxed{-2 < x < 5}$.", 1),
    ("inequality", "(-2,5)", "Therefore, the final answer is $\\boxed{-2 \\le x < 5}$.", 0),
    ("inequality", "(3, \\infty)", "Therefore, the final answer is $\\boxed{x < 3}$.", 0),
    # 8. notations a grader reads as the answer
    ("modulus", "2", "Since $2^3 \\equiv 1 \\pmod 7$, the final answer is $\\boxed{2 \\pmod{7}}$.", 1),
    ("modulus", "3", "Since $2^3 \\equiv 1 \\pmod 7$, the final answer is $\\boxed{2 \\pmod{7}}$.", 0),
    ("text_list", "\\text{A, C}", "The valid ones are Therefore, the final answer is $\\boxed{A, C}$.", 1),
    ("option", "B", "Evaluating each option, only option (B) gives $12$. The correct option is (B).", 1),
    ("option", "\\textbf{(B)}", "Only option (B) gives $12$. The final answer is $\\boxed{\\textbf{(B) } 12}$.", 1),
    ("option", "B", "Evaluating each option, only option (B) gives $12$. So the answer is **(B)**.", 1),
    ("option", "C", "Evaluating each option, only option (B) gives $12$. The correct option is (B).", 0),
    # 6. an explanation in parentheses is not a second answer
    ("remark", "7", "Therefore, the final answer is $\\boxed{7 \\text{ (since } 2 + 5 = 7)}$.", 1),
    ("remark", "-4", "The minimum is $\\boxed{-4 \\text{ (attained at } x = 2)}$.", 1),
]


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(timeout_s=30)  # verdicts are under test here, not speed
    yield v
    v.close()


@pytest.mark.parametrize("cause,reference,response,expected", CASES,
                         ids=[f"{i:02d}-{c[0]}" for i, c in enumerate(CASES)])
def test_review_case(verifier, cause, reference, response, expected):
    verifier.check_reference(Problem("review", "", reference))  # the reference must parse
    score = verifier.score_batch([response], [Problem("review", "", reference)])[0]
    assert score.reward == expected, (score.extracted, score.flags)


@pytest.mark.parametrize("reference,answer,expected", [
    ("(3, \\infty)", "x > 3", True), ("[3, \\infty)", "3 \\le x", True), ("(-2, 5]", "5 \\geq x > -2", True),
    ("(3, \\infty)", "x \\ge 3", False), ("x > 3", "(3, \\infty)", True), ("(-\\infty, 3)", "x > 3", False),
])
def test_inequality_against_interval_is_decided_in_process(verifier, reference, answer, expected):
    score = verifier.score(f"\\boxed{{{answer}}}", reference)
    assert score.correct is expected and score.details["path"] == "fast"
