import random

import pytest

from rlvr.evaluation.metrics import greedy_accuracy
from rlvr.tasks.arithmetic import ArithmeticTask, ArithmeticVerifier
from rlvr.tasks.digit_sort import DigitSortTask, DigitSortVerifier, make_problem
from rlvr.types import Completion, Group
from rlvr.verifiers.base import get_verifier


def test_trace_is_the_sorted_digits_and_the_verifier_is_strict():
    task = DigitSortTask(5)
    p = make_problem("83152")
    assert p.prompt == "|83152=" and p.reference == "12358" and task.trace(p) == ">12358"
    v = get_verifier("digit_sort")
    got = [s.correct for s in v.score_batch([">12358", ">12358 12385", ">12385", "12358", ">"], [p] * 5)]
    assert got == [True, False, False, False, False]
    with pytest.raises(ValueError):
        v.check_reference(make_problem("83152").__class__("x", "|21=", "21", "digit_sort"))


def test_repeats_and_leading_zeros_are_kept():
    p = make_problem("90900")
    assert p.reference == "00099"
    assert DigitSortVerifier().score_batch([">00099", ">99"], [p] * 2)[0].correct
    assert not DigitSortVerifier().score_batch([">99"], [p])[0].correct


def test_train_and_heldout_are_disjoint():
    task = DigitSortTask()
    held = {p.id for p in task.heldout(100)}
    train = {p.id for p in task.sample(random.Random(0), 2000)}
    assert len(held) == 100 and not held & train


class _Echo:
    """An engine that answers each problem with a fixed text per verifier."""

    def __init__(self, answers):
        self.answers = answers

    def generate(self, problems, n, params, seed=0):
        return [Group(p, [], [Completion(self.answers(p), [1], [], "stop")]) for p in problems]


def test_greedy_accuracy_reports_each_verifier_of_a_mixed_set():
    arith, sort = ArithmeticTask(3, "+").heldout(4), DigitSortTask().heldout(6)
    verifiers = {"arithmetic": ArithmeticVerifier(), "digit_sort": DigitSortVerifier()}
    # right on every sorting problem, wrong on every addition
    engine = _Echo(lambda p: ">" + p.reference if p.verifier == "digit_sort" else ">0")
    res = greedy_accuracy(engine, arith + sort, verifiers, 8)
    assert res["eval/accuracy"] == pytest.approx(0.6)
    assert res["eval/digit_sort/accuracy"] == 1.0 and res["eval/arithmetic/accuracy"] == 0.0
    # one verifier: no breakdown (it would repeat eval/accuracy)
    assert "eval/digit_sort/accuracy" not in greedy_accuracy(engine, sort, verifiers, 8)
