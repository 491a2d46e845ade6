"""The judge's verdict parser and template, by hand."""

import pytest

from rlvr.types import Problem
from rlvr.verifiers.judge import JudgeVerifier, parse_verdict, render


@pytest.mark.parametrize("reply, verdict, expected", [
    ("Yes, it is correct.", "yes_no", 1.0),
    ("no. (yes would be wrong)", "yes_no", 0.0),       # the first verdict counts
    ("I cannot tell", "yes_no", None),
    ("Score: 7/10", "score", 0.7),
    ("rating = 10", "score", 1.0),
    ("seven", "score", None),
    ("|>579", r">(\d+)", 0.579 * 1000 / 10),            # a custom pattern, divided by max_score
])
def test_parse_verdict(reply, verdict, expected):
    assert parse_verdict(reply, verdict, 10.0) == (None if expected is None else pytest.approx(expected))


def test_template_and_bad_options_fail_at_build():
    p = Problem("1", [{"role": "user", "content": "2+2?"}], reference="4")
    assert render("{prompt}|{response}|{reference}", "four", p) == "2+2?|four|4"
    with pytest.raises(KeyError):
        JudgeVerifier(url="http://127.0.0.1:1/v1", template="{question}")
    with pytest.raises(ValueError, match="expected http"):
        JudgeVerifier(url="ftp://x")
