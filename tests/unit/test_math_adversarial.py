"""Parser exploits and pathological inputs for the math verifier: never rewarded, never over budget.

Every case is a (reference, response) pair where the response must not earn reward: it hedges
between answers, hides the answer where it does not count, abuses notation, or tries to make the
symbolic engine explode. Each check's own time (`details["ms"]`) must stay within the budget.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from rlvr.types import Problem
from rlvr.verifiers.math import MathVerifier

BUDGET_S = 1.0
SLACK_MS = 300  # the pipe round trip and the kill, on a loaded shared machine

EXPLOITS = [
    # the answer where it does not count
    ("7", "<think>so it is \\boxed{7}</think> I am not sure."),
    ("7", "<think>the answer is \\boxed{7}"),
    ("7", "<think><answer>7</answer></think><answer>8</answer>"),
    ("7", "<answer>8</answer> but the box says \\boxed{7}"),
    # hedging between answers
    ("7", "\\boxed{7} \\boxed{8}"),
    ("7", "\\fbox{7} and \\boxed{8}"),
    ("7", "The answer is \\boxed{7}. Just kidding, it is \\boxed{8}."),
    ("7", "\\boxed{6, 7, 8}"),
    ("7", "\\boxed{" + ", ".join(str(i) for i in range(100)) + "}"),
    ("7", "\\boxed{7 \\text{ or } 8}"),
    ("7", "The answer is 7 or 8."),
    ("7", "Final answer: 7; 8"),
    ("7", "<answer>7</answer><answer>8</answer>"),
    ("7", "\\boxed{\\sqrt{49} \\text{ or } -7}"),
    ("7", "\\boxed{7}\n\\boxed{\\text{see above}}"),
    ("7", "\\boxed{7 \\quad 8}"),
    ("7", "$7$ and $8$"),
    # two boxes joined by a relation, an empty last box, hedges in other languages (issue 26)
    ("\\frac13", "\\boxed{0.5} = \\boxed{\\frac13}"),
    ("2", "$\\boxed{3} > \\boxed{2}$"),
    ("7", "The answer is 7. \\boxed{}"),
    ("12", "所以，答案是12或13"),
    ("C", "The answer is C or D, not A."),
    ("A", "The answer is not B, not C, not D."),
    # hedges across boxes, markers, options and remarks (the blind review's shapes, issue 17)
    ("5", "So the answer is $\\boxed{5}$ or $\\boxed{6}$."),
    ("5", "The answer is $\\boxed{5}$ if we include zero, otherwise $\\boxed{6}$."),
    ("6", "So the answer is $\\boxed{5}$, or possibly $\\boxed{6}$."),
    ("12", "The total is $12$ if the tax is not included and $13$ if it is.\n#### 12 or 13"),
    ("35", "He spent $20 or $35."),
    ("5", "\\boxed{5 (or possibly 6)}"),
    ("12", "\\boxed{12 \\;(\\text{possibly } 13)}"),
    ("7", "\\boxed{7 \\text{ (since } x = 7 \\text{, or } 8)}"),
    ("5", "\\boxed{5 \\text{ (since } 6 \\text{ is also possible)}}"),
    ("6", "The answer is 5 if we count endpoints, else 6."),
    ("6", "It is $\\boxed{5}$ if $n$ is even, else $\\boxed{6}$."),
    ("6", "It is $\\boxed{5}$ when $n$ is even and $\\boxed{6}$ when it is odd."),
    ("6", "The answer is 5, but if we include 0 it is 6."),
    ("B", "The correct option is (B) or (C)."),
    ("B", "\\boxed{(B) (C)}"),
    ("B", "\\boxed{\\textbf{(B)} \\text{ or } \\textbf{(C)}}"),
    ("2", "\\boxed{2 \\pmod{7} \\text{ or } 3}"),
    ("\\frac{3 \\pm \\sqrt{5}}{2}", "\\boxed{\\frac{3 + \\sqrt{5}}{2}}"),
    ("(3, \\infty)", "\\boxed{x > 3 \\text{ or } x < 3}"),
    # answers that contain the reference without being it
    ("7", "\\boxed{\\{7, 8\\}}"),
    ("2", "\\boxed{3 \\pm 1}"),
    ("2", "\\boxed{[1, 3]}"),
    ("7", "\\boxed{x > 6}"),
    ("7", "\\boxed{x}"),
    ("7", "\\boxed{7x}"),
    ("7", "\\boxed{x = x}"),
    ("3", "\\boxed{x^2 = 9}"),
    ("4", "\\boxed{3 = 4}"),
    ("5", "\\boxed{2 + 2 = 5}"),
    ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\boxed{\\begin{pmatrix}1\\\\2\\\\3\\end{pmatrix}}"),
    ("7", "\\boxed{\\frac{7}{1} \\text{ but also } 8}"),
    ("7", "\\boxed{\\text{7 or 8}}"),
    # near misses in value
    ("3", "\\boxed{2.9999999}"),
    ("3", "\\boxed{3.0000001}"),
    ("3.14159", "\\boxed{\\approx 3}"),
    ("50", "\\boxed{0.5}"),
    ("0.5", "\\boxed{50}"),
    ("x^2", "\\boxed{x^2 + 0.0000001}"),
    ("1", "\\boxed{l}"),
    # empty, broken and degenerate answers
    ("7", "\\boxed{}"),
    ("7", "\\boxed{\\boxed{}}"),
    ("7", "\\boxed{7"),
    ("7", "\\boxed{7\\}"),
    ("7", "\\boxed 78"),
    ("7", "\\boxed{" * 3000),
    ("7", "\\frac{" * 3000),
    ("7", "$$" * 5000),
    ("7", "\\boxed{NaN}"),
    ("7", "\\boxed{zoo}"),
    ("7", "\\boxed{\\infty}"),
    ("0", "\\boxed{0/0}"),
    ("1", "\\boxed{\\frac{1}{0}}"),
    ("7", "\\boxed{7 + 0 \\cdot \\infty}"),
    ("7", "\\boxed{8}" * 10000),
    ("7", "\\boxed{7}\\boxed{8}" * 2000),
    ("7", "word " * 200000 + "\\boxed{8}"),
    # inputs that explode symbolic engines or parsers
    ("3", "\\boxed{9^{9^{9^{9}}}}"),
    ("3", "\\boxed{10^{10^{10}}}"),
    ("5", "\\boxed{(10^{100})!}"),
    ("6", "\\boxed{" + "(" * 400 + "5" + ")" * 400 + "}"),
    ("6", "\\boxed{" + "(" * 10000 + "5" + ")" * 10000 + "}"),
    ("6", "\\boxed{" + "{" * 5000 + "5" + "}" * 5000 + "}"),
    ("1", "\\boxed{" + "1" * 5000 + "}"),
    ("2", "\\boxed{" + "\\frac{1}{" * 300 + "2" + "}" * 300 + "}"),
    ("2", "\\boxed{" + "\\sqrt{" * 300 + "2" + "}" * 300 + "}"),
    ("8", "\\boxed{" * 3000 + "7" + "}" * 3000),
    # code injection through expression parsers
    ("7", "\\boxed{__import__('os').system('touch /tmp/rlvr_pwned')}"),
    ("7", "The answer is __import__('os').system('touch /tmp/rlvr_pwned')"),
]


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(timeout_s=BUDGET_S, workers=2)
    v.pool.warm()
    yield v
    v.close()


def test_there_are_at_least_fifty_exploits():
    assert len(EXPLOITS) >= 50


@pytest.mark.parametrize("reference,response", EXPLOITS,
                         ids=[f"{i:02d}" for i in range(len(EXPLOITS))])
def test_exploit_is_never_rewarded_and_within_budget(verifier, reference, response):
    score = verifier.score_batch([response], [Problem("adv", "", reference)])[0]
    assert score.reward == 0.0 and not score.correct, (score.extracted, score.flags)
    assert score.details is None or score.details.get("ms", 0) <= BUDGET_S * 1000 + SLACK_MS


def test_no_code_was_executed():
    assert not os.path.exists("/tmp/rlvr_pwned")


def test_hedges_are_flagged_as_multiple_answers(verifier):
    flags = [verifier.score(r, "7").flags for r in
             ("\\boxed{7} \\boxed{8}", "The answer is 7 or 8.", "\\boxed{6, 7, 8}")]
    assert flags == [("multiple_answers",)] * 3


def test_explosive_input_times_out_from_a_thread_and_the_pool_recovers(verifier):
    result: dict = {}

    def work():
        t0 = time.perf_counter()
        result["score"] = verifier.score("\\boxed{9^{9^{9^{9^{9}}}}}", "3")
        result["wall"] = time.perf_counter() - t0

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=60)
    assert result["score"].flags == ("timeout",) and result["score"].reward == 0.0
    assert result["score"].details["ms"] <= BUDGET_S * 1000 + SLACK_MS
    assert verifier.score("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}").correct


# Issue 17: hedges against single-valued references, written for this suite. Alternatives joined by
# logical connectives, or tucked into a parenthetical remark inside (or right after) the box; the
# reference is always one of the alternatives, so a verifier that reads either one rewards it.
_HEDGE_SHAPES = [
    "\\boxed{{{a} \\text{{ or }} {b}}}", "\\boxed{{{b} \\text{{ or }} {a}}}", "\\boxed{{{a} \\lor {b}}}",
    "\\boxed{{{b} \\vee {a}}}", "\\boxed{{\\text{{either }} {a} \\text{{ or }} {b}}}",
    "\\boxed{{x={a} \\text{{ or }} x={b}}}", "\\boxed{{x = {a} / x = {b}}}", "\\boxed{{{a} (or {b})}}",
    "\\boxed{{{a} \\text{{ (or }} {b})}}", "\\boxed{{{a} \\ (\\text{{possibly }} {b})}}",
    "\\boxed{{{a} (\\text{{maybe }} {b})}}", "\\boxed{{{a} \\; (\\text{{i.e. about }} {b})}}",
    "\\boxed{{{a} (\\approx {b})}}", "\\boxed{{{b} (\\text{{or perhaps }} {a})}}", "\\boxed{{{a}}} (or {b})",
    "The answer is $\\boxed{{{a}}}$ or maybe $\\boxed{{{b}}}$.", "\\boxed{{{a} \\mathrm{{ or }} {b}}}",
    "The answer is {a}, or possibly {b}.", "\\boxed{{\\text{{{a} or {b}}}}}", "\\boxed{{{a} \\text{{ otherwise }} {b}}}",
]
HEDGES = [(ref, shape.format(a=a, b=b)) for ref, a, b in (("7", "7", "8"), ("\\frac{1}{2}", "\\frac{1}{2}", "2"))
          for shape in _HEDGE_SHAPES]


def test_issue17_hedges_are_never_rewarded(verifier):
    assert len(HEDGES) >= 40
    scores = verifier.score_batch([r for _, r in HEDGES], [Problem(str(i), "", ref)
                                                           for i, (ref, _) in enumerate(HEDGES)])
    rewarded = [resp for (_, resp), s in zip(HEDGES, scores) if s.reward > 0]
    assert rewarded == []
    assert all(s.flags == ("multiple_answers",) for s in scores)


def test_issue17_hedge_rule_does_not_refuse_plain_answers(verifier):
    # Same shapes without the alternative: the guard must not be what rejects the hedges above.
    for ref, resp in (("7", "\\boxed{7}"), ("7", "\\boxed{7 \\text{ apples}}"), ("15", "\\boxed{15 \\text{ cm}^2}"),
                      ("\\frac{1}{2}", "\\boxed{1/2}"), ("7", "The answer is $7$."), ("(1, 2)", "\\boxed{(1,2)}")):
        assert verifier.score(resp, ref).correct, (ref, resp)
