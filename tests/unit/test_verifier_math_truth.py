"""Truth tables for the math verifier: gold/prediction pairs labelled by hand, by category.

Each category has pairs that should match and pairs that should not. The tests assert agreement of
at least 97 % on each side overall and print the per-category numbers (run with -s to see them).
"""

from __future__ import annotations

import pytest

from rlvr.types import Problem
from rlvr.verifiers.math import MathVerifier

COT = ("Let me work through this carefully. First, we set up the equation from the problem "
       "statement: the total is the sum of the parts, so we add 12 and 30 to get 42. Then we "
       "divide by 2, which gives 21 as an intermediate result. Checking the constraint again, "
       "we must also subtract the 3 items already counted. ")

# (gold, response) pairs that must be judged correct, by category.
MATCH = {
    "separators": [
        ("1000000", "\\boxed{1\\,000\\,000}"), ("1000000", "\\boxed{1 000 000}"), ("5,000", "\\boxed{5000 \\text{ dollars}}"),
        ("1000", "\\boxed{1,000}"), ("1234567", "\\boxed{1,234,567}"), ("1000000", "\\boxed{1{,}000{,}000}"),
        ("12345", "The answer is 12,345."), ("2500", "\\boxed{2\\,500}"), ("1,000", "\\boxed{1000}"),
        ("10000", "$10,000$"), ("3.5", "\\boxed{3.50}"), ("-7", "\\boxed{-7}"), ("0.25", "\\boxed{.25}"),
        ("5", "\\boxed{5.0}"), ("42", "\\boxed{042}"),
    ],
    "units_currency": [
        ("\\$25", "The total is \\boxed{25} dollars."), ("6\\text{ cm}^2", "\\boxed{6}"), ("90^\\circ", "\\boxed{90}"),
        ("4.5\\text{ hours}", "\\boxed{4.5}"), ("€30", "\\boxed{30}"), ("£12.50", "\\boxed{12.5}"),
        ("18.90", "\\boxed{\\$18.90}"), ("5", "\\boxed{5\\text{ cm}}"), ("12", "\\boxed{12 \\text{ dollars}}"),
        ("30", "\\boxed{30^\\circ}"), ("45", "\\boxed{45^{\\circ}}"), ("7", "\\boxed{7 \\mbox{ hours}}"),
        ("100", "The answer is $100 meters."), ("2.5", "\\boxed{2.5\\text{ kg}}"), ("9", "\\boxed{9 \\text{ apples}}"),
        ("60", "\\boxed{60 \\text{ mph}}"), ("20", "\\boxed{\\$20}"), ("8", "\\boxed{8\\,\\text{m}}"),
        ("15", "\\boxed{15 \\text{ minutes}}"), ("3", "\\boxed{3 \\text{ days}}"),
    ],
    "fractions": [
        ("0.75", "\\boxed{\\frac{3}{4}}"), ("\\frac{1}{6}", "\\boxed{0.1\\overline{6}}"), ("-\\frac{1}{2}", "\\boxed{-0.5}"),
        ("1.5", "\\boxed{\\frac{3}{2}}"),
        ("\\frac{1}{2}", "\\boxed{0.5}"), ("0.5", "\\boxed{\\frac{1}{2}}"), ("\\frac{3}{4}", "\\boxed{3/4}"),
        ("\\frac{2}{4}", "\\boxed{\\frac12}"), ("\\frac{1}{3}", "\\boxed{0.333333}"), ("-\\frac{3}{4}", "\\boxed{-0.75}"),
        ("\\frac{7}{2}", "\\boxed{3.5}"), ("\\dfrac{5}{8}", "\\boxed{\\frac{5}{8}}"), ("\\frac{10}{4}", "\\boxed{\\tfrac{5}{2}}"),
        ("\\frac{-3}{4}", "\\boxed{-\\frac{3}{4}}"), ("\\frac{6}{3}", "\\boxed{2}"), ("\\frac{2}{3}", "\\boxed{\\frac{4}{6}}"),
        ("1/8", "\\boxed{0.125}"), ("\\frac{9}{4}", "\\boxed{2.25}"),
    ],
    "latex": [
        ("\\frac{1+\\sqrt{5}}{2}", "\\boxed{\\frac{\\sqrt{5}+1}{2}}"), ("\\sqrt[3]{2}", "\\boxed{2^{1/3}}"),
        ("x^2-1", "\\boxed{(x-1)(x+1)}"), ("\\frac{9}{2}", "\\boxed{4\\frac{1}{2}}"),
        ("2\\sqrt{3}", "\\boxed{\\sqrt{12}}"), ("\\sqrt[3]{8}", "\\boxed{2}"), ("\\frac{a+b}{2}", "\\boxed{\\frac{b+a}{2}}"),
        ("2x+3", "\\boxed{3+2x}"), ("\\frac{1}{x}", "\\boxed{x^{-1}}"), ("\\text{(C)}", "\\boxed{C}"),
        ("C", "The answer is \\textbf{(C)}."),
        ("\\frac{\\sqrt{3}}{2}", "\\boxed{\\frac{\\sqrt3}{2}}"), ("3\\sqrt{2}", "\\boxed{\\sqrt{18}}"),
        ("2\\pi", "\\boxed{2 \\pi}"), ("\\frac{\\pi}{4}", "\\boxed{\\pi/4}"), ("x^2+2x+1", "\\boxed{(x+1)^2}"),
        ("\\sqrt{2}", "\\boxed{2^{1/2}}"), ("e^{2}", "\\boxed{e^2}"), ("\\frac{1}{\\sqrt{2}}", "\\boxed{\\frac{\\sqrt{2}}{2}}"),
        ("2^{10}", "\\boxed{1024}"), ("\\binom{5}{2}", "\\boxed{10}"), ("5!", "\\boxed{120}"),
        ("\\infty", "\\boxed{\\infty}"), ("3+2i", "\\boxed{2i+3}"), ("\\log_2 8", "\\boxed{3}"),
        ("\\left(\\frac{1}{2}\\right)", "\\boxed{\\frac{1}{2}}"), ("\\text{Monday}", "\\boxed{\\text{Monday}}"),
    ],
    "sets_intervals": [
        ("\\{1,2\\}", "\\boxed{1, 2}"), ("1,2", "\\boxed{\\{1, 2\\}}"), ("2, 3", "\\boxed{x = 2 \\text{ or } x = 3}"),
        ("[1,2] \\cup [3,4]", "\\boxed{[3,4]\\cup[1,2]}"),
        ("\\{-2, 2\\}", "\\boxed{\\pm 2}"), ("\\pm 2", "\\boxed{2, -2}"), ("[-2, 5)", "\\boxed{[-2,5)}"),
        ("(-\\infty, -1) \\cup (1, \\infty)", "\\boxed{(-\\infty,-1)\\cup(1,\\infty)}"), ("x \\ge 2", "\\boxed{[2, \\infty)}"),
        ("(3, -2)", "\\boxed{(3,-2)}"),
        ("\\{1,2,3\\}", "\\boxed{\\{3,2,1\\}}"), ("(0,1)", "\\boxed{(0, 1)}"), ("[0,\\infty)", "\\boxed{[0, \\infty)}"),
        ("(-\\infty,2]", "\\boxed{(-\\infty, 2]}"), ("1, 2", "\\boxed{2, 1}"), ("[1,5]", "\\boxed{[1,5]}"),
        ("(-\\infty, 0) \\cup (1, \\infty)", "\\boxed{(-\\infty,0)\\cup(1,\\infty)}"), ("\\{2\\}", "\\boxed{2}"),
        ("-1, 3", "\\boxed{3, -1}"), ("x \\in [2, 4]", "\\boxed{[2,4]}"),
    ],
    "matrices": [
        ("\\begin{pmatrix} 3 \\\\ -1 \\end{pmatrix}", "\\boxed{\\begin{pmatrix}3\\\\-1\\end{pmatrix}}"),
        ("\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\boxed{\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}}"),
        ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\boxed{\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}}"),
        ("\\begin{bmatrix} 0.5 & 1 \\end{bmatrix}", "\\boxed{\\begin{bmatrix} \\frac{1}{2} & 1 \\end{bmatrix}}"),
        ("\\begin{pmatrix} 2 & 0 \\\\ 0 & 2 \\end{pmatrix}", "\\boxed{\\begin{pmatrix}2 & 0\\\\ 0 & 2\\end{pmatrix}}"),
        ("\\begin{pmatrix} -1 \\\\ 4 \\\\ 2 \\end{pmatrix}", "\\boxed{\\begin{pmatrix}-1\\\\4\\\\2\\end{pmatrix}}"),
    ],
    "equations": [
        ("y = -x + 4", "\\boxed{y=4-x}"), ("x=2, y=3", "\\boxed{x = 2, y = 3}"),
        ("y=2x+3", "\\boxed{y = 3 + 2x}"), ("x=3", "\\boxed{3}"), ("3", "\\boxed{x = 3}"), ("x = 5", "\\boxed{x=5}"),
        ("y = x^2", "\\boxed{y=x^{2}}"), ("x^2+y^2=1", "\\boxed{y^2 + x^2 = 1}"), ("k=-2", "\\boxed{-2}"),
        ("a = 4", "The answer is $a = 4$."),
    ],
    "percentages": [
        ("10\\%", "\\boxed{0.1}"),
        ("50\\%", "\\boxed{50\\%}"), ("50", "\\boxed{50\\%}"), ("0.5", "\\boxed{50\\%}"), ("25\\%", "\\boxed{25}"),
        ("12.5\\%", "\\boxed{12.5\\%}"), ("75\\%", "\\boxed{0.75}"), ("20", "\\boxed{20 \\%}"), ("5\\%", "\\boxed{5 percent}"),
    ],
    "cot_boxed": [
        ("3", COT + "**Final Answer:** 3"), ("12", COT + "\\[\\boxed{12}\\]"), ("8", COT + "$$\\boxed{8}$$"),
        ("18", COT + "So the final count is $21 - 3 = 18$.\n\nTherefore the answer is $\\boxed{18}$."),
        ("\\frac{1}{2}", COT + "Normalising, the probability is one half.\n\n**Final Answer**\n\\[\\boxed{\\dfrac{1}{2}}\\]"),
        ("7", "<think>" + COT + "Maybe 6? No, recount: 7.</think>\nThe answer is \\boxed{7}."),
        ("42", COT + "\n\nFinal answer: $\\boxed{42}$"), ("2\\sqrt{5}", COT + "Hence $d = \\boxed{2\\sqrt{5}}$."),
        ("12", COT + "<answer>12</answer>"), ("9", COT + "The answer is 9."),
        ("\\frac{3}{5}", COT + "Thus the ratio is $\\boxed{\\frac35}$, as required."),
        ("100", COT + "The final answer is \\boxed{\\boxed{100}}."),
        ("1000", COT + "The total cost is $\\boxed{\\$1,000}$."),
    ],
}

# (gold, response) pairs that must NOT be judged correct, by category.
NO_MATCH = {
    "separators": [
        ("1000000", "\\boxed{100000}"),
        ("1000", "\\boxed{1,001}"), ("1234567", "\\boxed{1,234,568}"), ("100", "\\boxed{1,000}"),
        ("12", "\\boxed{1,2}"), ("3.5", "\\boxed{3.05}"), ("-7", "\\boxed{7}"), ("0.25", "\\boxed{2.5}"),
        ("5", "\\boxed{5.01}"), ("42", "\\boxed{24}"), ("10000", "\\boxed{1000}"),
    ],
    "units_currency": [
        ("£12.50", "\\boxed{12.05}"),
        ("18.90", "\\boxed{\\$18.09}"), ("5", "\\boxed{50\\text{ cm}}"), ("12", "\\boxed{13 \\text{ dollars}}"),
        ("30", "\\boxed{60^\\circ}"), ("7", "\\boxed{7.5 \\text{ hours}}"), ("20", "\\boxed{\\$2}"),
        ("100", "\\boxed{10 \\text{ meters}}"), ("9", "\\boxed{8 \\text{ apples}}"),
    ],
    "fractions": [
        ("0.75", "\\boxed{\\frac{4}{3}}"), ("1.5", "\\boxed{1.05}"),
        ("\\frac{1}{2}", "\\boxed{0.45}"), ("\\frac{1}{3}", "\\boxed{0.33}"), ("\\frac{1}{3}", "\\boxed{0.3}"),
        ("\\frac{3}{4}", "\\boxed{4/3}"), ("-\\frac{3}{4}", "\\boxed{0.75}"), ("\\frac{2}{3}", "\\boxed{0.67}"),
        ("\\frac{7}{2}", "\\boxed{\\frac{2}{7}}"), ("3", "\\boxed{3.0000001}"), ("\\frac{5}{8}", "\\boxed{\\frac{5}{9}}"),
        ("1/8", "\\boxed{0.12}"),
    ],
    "latex": [
        ("2\\sqrt{3}", "\\boxed{\\sqrt{6}}"), ("2x+3", "\\boxed{2x-3}"), ("C", "\\boxed{D}"), ("\\sqrt[3]{8}", "\\boxed{3}"),
        ("\\frac{\\pi}{2}", "\\boxed{\\pi}"),
        ("\\frac{\\sqrt{3}}{2}", "\\boxed{\\frac{\\sqrt{2}}{2}}"), ("3\\sqrt{2}", "\\boxed{2\\sqrt{3}}"),
        ("2\\pi", "\\boxed{\\pi}"), ("x^2+2x+1", "\\boxed{(x-1)^2}"), ("e^{2}", "\\boxed{2e}"),
        ("2^{10}", "\\boxed{1000}"), ("\\infty", "\\boxed{-\\infty}"), ("3+2i", "\\boxed{3-2i}"),
        ("\\text{Monday}", "\\boxed{\\text{Tuesday}}"), ("\\sqrt{2}", "\\boxed{1.41}"),
    ],
    "sets_intervals": [
        ("(3, -2)", "\\boxed{(-2,3)}"), ("\\{-2, 2\\}", "\\boxed{2}"), ("[-2, 5)", "\\boxed{(-2,5)}"),
        ("x \\ge 2", "\\boxed{(2, \\infty)}"),
        ("\\{1,2,3\\}", "\\boxed{\\{1,2\\}}"), ("(0,1)", "\\boxed{[0,1]}"), ("[0,\\infty)", "\\boxed{(0,\\infty)}"),
        ("1, 2", "\\boxed{1, 3}"), ("[1,5]", "\\boxed{[1,5)}"), ("(-\\infty,2]", "\\boxed{(-\\infty,2)}"),
        ("2", "\\boxed{\\{2, 4\\}}"), ("-1, 3", "\\boxed{-1}"),
    ],
    "matrices": [
        ("\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\boxed{\\begin{pmatrix}1&3\\\\2&4\\end{pmatrix}}"),
        ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\boxed{\\begin{pmatrix} 2 \\\\ 1 \\end{pmatrix}}"),
        ("\\begin{pmatrix} 2 & 0 \\\\ 0 & 2 \\end{pmatrix}", "\\boxed{2}"),
        ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\boxed{\\begin{pmatrix} 1 & 2 \\end{pmatrix}}"),
    ],
    "equations": [
        ("y = -x + 4", "\\boxed{y = x + 4}"),
        ("y=2x+3", "\\boxed{y = 3x + 2}"), ("x=3", "\\boxed{4}"), ("3", "\\boxed{x = 4}"), ("4", "\\boxed{3 = 4}"),
        ("y = x^2", "\\boxed{y = x^3}"), ("x^2+y^2=1", "\\boxed{x^2 + y^2 = 2}"),
    ],
    "percentages": [
        ("10\\%", "\\boxed{0.01}"),
        ("50\\%", "\\boxed{5\\%}"), ("50", "\\boxed{0.05}"), ("0.5", "\\boxed{5\\%}"), ("25\\%", "\\boxed{0.025}"),
        ("12.5\\%", "\\boxed{12\\%}"), ("75\\%", "\\boxed{7.5}"),
    ],
    "cot_boxed": [
        ("18", COT + "So the final count is $21 - 3 = 18$... wait, no: \\boxed{17}."),
        ("7", "<think>The answer is \\boxed{7}.</think>\nI am not sure."),
        ("7", COT + "It is \\boxed{7} or \\boxed{8}."), ("42", COT + "Final answer: 41 or 42."),
        ("12", COT + "<answer>12</answer><answer>13</answer>"), ("9", COT + "I could not finish the computation."),
        ("3", COT + "\\boxed{3, 4, 5}"), ("100", COT + "\\boxed{}"),
    ],
}


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(timeout_s=2.0)
    yield v
    v.close()


def _agreement(verifier, table, expected: bool) -> dict[str, tuple[int, int, list]]:
    out = {}
    for category, pairs in table.items():
        problems = [Problem(f"{category}{i}", "", gold) for i, (gold, _) in enumerate(pairs)]
        scores = verifier.score_batch([resp for _, resp in pairs], problems)
        wrong = [(g, r[-60:], s.extracted, s.flags) for (g, r), s in zip(pairs, scores)
                 if s.correct != expected]
        out[category] = (len(pairs) - len(wrong), len(pairs), wrong)
    return out


def _report(name: str, result) -> float:
    agree = sum(a for a, _, _ in result.values())
    total = sum(n for _, n, _ in result.values())
    print(f"\n{name}: {agree}/{total} = {100 * agree / total:.1f}%")
    for category, (a, n, wrong) in result.items():
        print(f"  {category:16s} {a}/{n}" + (f"  misses: {wrong}" if wrong else ""))
    return agree / total


def test_tables_are_broad():
    assert sum(len(p) for p in MATCH.values()) >= 100
    assert sum(len(p) for p in NO_MATCH.values()) >= 70
    assert set(MATCH) == set(NO_MATCH)


def test_agreement_on_pairs_that_should_match(verifier):
    assert _report("should match", _agreement(verifier, MATCH, True)) >= 0.97


def test_agreement_on_pairs_that_should_not_match(verifier):
    assert _report("should not match", _agreement(verifier, NO_MATCH, False)) >= 0.97
