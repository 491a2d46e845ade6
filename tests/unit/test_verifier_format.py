"""Format verifier: think/answer layout rules, each failure named."""

from __future__ import annotations

import pytest

from rlvr.types import Problem
from rlvr.verifiers.format import FormatVerifier, format_problems


@pytest.mark.parametrize("text,options,problems", [
    ("<think>reason</think>\n<answer>3</answer>", {}, []),
    ("<think>reason</think><answer>3</answer>\n", {}, []),
    ("<answer>3</answer>", {}, ["think_tags: 0 open, 0 close"]),
    ("<think>a</think><think>b</think><answer>3</answer>", {}, ["think_tags: 2 open, 2 close"]),
    ("<think>  </think><answer>3</answer>", {}, ["empty_think"]),
    ("hi <think>a</think><answer>3</answer>", {}, ["text_before_think"]),
    ("<think>a</think><answer>3</answer><answer>4</answer>", {}, ["answer_tags: 2 blocks"]),
    ("<think>a</think><answer>3", {}, ["answer_tags: 0 blocks, unbalanced"]),
    ("<think>a</think><answer> </answer>", {}, ["empty_answer"]),
    ("<think>a</think><answer>3</answer> PS: 4", {}, ["text_after_answer"]),
    ("<think>a</think>So \\boxed{3}.", {"answer": "boxed"}, []),
    ("<think>a</think>\\boxed{3} \\boxed{4}", {"answer": "boxed"}, ["boxed: 2 boxes"]),
    ("<think>a</think>\\boxed{3}", {"answer": "either"}, []),
    ("<think>a</think><answer>3</answer>", {"answer": "either"}, []),
    ("reasoning</think><answer>3</answer>", {"think_prefilled": True}, []),
    ("<think>reasoning</think><answer>3</answer>", {"think_prefilled": True}, ["think_tags: 1 open, 1 close"]),
    ("<answer>3</answer>", {"require_think": False}, []),
])
def test_format_rules(text, options, problems):
    assert format_problems(text, **options) == problems


def test_format_verifier_scores_and_dedupes():
    v = FormatVerifier()
    good, bad = "<think>a</think><answer>1</answer>", "<answer>1</answer>"
    scores = v.score_batch([good, bad, good], [Problem("p", "")] * 3)
    assert [s.reward for s in scores] == [1.0, 0.0, 1.0]
    assert scores[1].flags == ("bad_format",) and scores[0] is scores[2]


def test_unknown_answer_mode_is_rejected():
    with pytest.raises(ValueError, match="answer must be"):
        FormatVerifier(answer="json")
