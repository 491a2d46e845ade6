import argparse

import pytest

from rlvr.errors import UserError
from rlvr.cli.eval import add_arguments, parse_options
from rlvr.evaluation.metrics import correct_counts, has_answers, sampled_metrics, vote_curve
from rlvr.types import Completion, Group, Problem, Score


def _group(pid: str, verdicts: list[tuple[str | None, bool]]) -> Group:
    completions = [Completion(str(a), [], [], "stop", Score(float(ok), ok, (), a))
                   for a, ok in verdicts]
    return Group(Problem(pid, pid, "5"), [], completions)


# Group A: answers 5, 4, 4, 5 (5 is right). Group B: no answer, 7, no answer, 7 (all wrong).
A = _group("a", [("5", True), ("4", False), ("4", False), ("5", True)])
B = _group("b", [(None, False), ("7", False), (None, False), ("7", False)])


def test_sampled_metrics_hand_values():
    m = sampled_metrics([A, B], [1, 2, 4])
    # A: pass@1 = 2/4; pass@2 = 1 − C(2,2)/C(4,2) = 5/6; pass@4 = 1. B: 0 everywhere.
    assert m["pass@1"] == pytest.approx(0.25)
    assert m["pass@2"] == pytest.approx(5 / 12)
    assert m["pass@4"] == pytest.approx(0.5)
    # A's 2-subsets: {5,4}→5 (tie, earliest) ×2, {5,5}→5, {4,4}→4, {4,5}→4 ×2: 3 of 6 right.
    assert m["maj@1"] == pytest.approx(0.25)
    assert m["maj@2"] == pytest.approx(0.25)
    assert m["maj@4"] == pytest.approx(0.5)    # 5 and 4 tie twice each; 5 comes first
    # mean@k: accuracy of the first k samples (A: 1, then 1/2, then 1/2).
    assert m["mean@1"] == pytest.approx(0.5)
    assert m["mean@2"] == pytest.approx(0.25)
    assert m["mean@4"] == pytest.approx(0.25)


def test_k_larger_than_n_is_skipped_and_counts_are_recorded():
    assert set(sampled_metrics([A], [1, 8])) == {"pass@1", "maj@1", "mean@1"}
    assert correct_counts([A, B]) == [2, 0]


def test_vote_curve_powers_of_two_up_to_n():
    six = _group("c", [("5", True)] * 2 + [("3", False)] * 4)
    assert [row["k"] for row in vote_curve([six])] == [1, 2, 4, 6]
    curve = vote_curve([A])
    assert [(r["k"], r["maj"], r["pass"]) for r in curve] == [
        (1, 0.5, 0.5), (2, 0.5, pytest.approx(5 / 6)), (4, 1.0, 1.0)]


def test_has_answers_tells_when_nothing_was_extracted():
    silent = _group("d", [(None, True), (None, False)])
    assert has_answers([A]) and not has_answers([silent])
    assert sampled_metrics([silent], [2])["maj@2"] == 0.0   # nothing to vote on


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["model", "--out", "o", *argv])


def test_parse_options_defaults_and_marker_escape():
    opts = parse_options(_args("--answer-marker", "\\n\\boxed{"))
    assert opts.ks == (1, 4, 16) and opts.samples == 16
    assert opts.budgets == (0, 8, 16, 24, 32, 40, 48)       # sixths of --max-new-tokens 48
    assert opts.temperatures == (0.3, 0.6, 1.0, 1.3)
    assert opts.answer_marker == "\n\\boxed{"
    assert parse_options(_args("--budgets", "", "--temperatures", "")).budgets == ()


@pytest.mark.parametrize("argv, words", [
    (["--k", "0,4"], "--k"), (["--k", "a,b"], "--k"), (["--k", ""], "--k"),
    (["--k", "4", "--samples", "2"], "--samples"), (["--temperatures", "0,1"], "--temperature"),
    (["--budgets=-1,4"], "--budgets"), (["--answer-marker", ""], "--answer-marker"),
    (["--answer-tokens", "0"], "--answer-tokens"), (["--n", "0"], "--n"),
])
def test_parse_options_rejects_bad_flags(argv, words):
    with pytest.raises(UserError, match=words):
        parse_options(_args(*argv))
