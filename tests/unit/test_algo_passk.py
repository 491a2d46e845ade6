import itertools
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr.algo.passk import maj_at_k, maj_at_k_one, majority_vote, mean_pass_at_k, pass_at_k


def test_pass_at_k_hand_values():
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - 21 / 45)   # 1 − C(7,2)/C(10,2)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 3, 3) == 1.0                          # fewer than k wrong samples
    assert pass_at_k(8, 2, 1) == pytest.approx(2 / 8)         # pass@1 is the fraction correct


def test_pass_at_k_stable_for_large_n():
    # C(999, 500)/C(1000, 500) = 500/1000 exactly, though both binomials overflow a float
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n),
                                                     st.integers(1, n))))
def test_pass_at_k_matches_subset_enumeration(nck):
    n, c, k = nck
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    brute = Fraction(sum(any(s) for s in subsets), len(subsets))
    assert pass_at_k(n, c, k) == pytest.approx(float(brute), abs=1e-12)


def test_pass_at_k_rejects_bad_arguments():
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_mean_pass_at_k():
    assert mean_pass_at_k([4, 4], [0, 4], 2) == pytest.approx(0.5)


def test_majority_vote_rules():
    assert majority_vote(["3", "4", "4", "3", None, None, None]) == "3"   # tie → first seen
    assert majority_vote([None, None, "7"]) == "7"                        # None never wins
    assert majority_vote([None, None]) is None
    assert majority_vote([]) is None
    assert majority_vote(["a", "b", "b"]) == "b"


def test_maj_at_k_hand_value():
    # subsets of 2 from [a, b, a, None]: ab→a ✓, aa ✓, a∅ ✓, ba→b ✗, b∅ ✗, a∅ ✓ → 4/6
    assert maj_at_k([["a", "b", "a", None]], ["a"], 2) == pytest.approx(4 / 6)


def test_maj_at_k_with_all_samples_is_the_majority_vote():
    answers = [["1", "2", "2"], ["5", None, "6"]]
    assert maj_at_k(answers, lambda i, a: a == ["2", "6"][i], 3) == pytest.approx(0.5)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["x", "y", "z", None]), min_size=1, max_size=8))
def test_maj_at_1_is_the_fraction_of_correct_samples(answers):
    expected = sum(a == "x" for a in answers) / len(answers)
    assert maj_at_k([answers], ["x"], 1) == pytest.approx(expected)


def test_maj_at_k_monte_carlo_is_close_to_exact():
    answers = ["1", "2", "1", "3", "2", "1", None, "2", "1", "4", "2", "1"]
    exact = maj_at_k_one(answers, lambda a: a == "1", 6, max_subsets=1000)   # C(12,6) = 924
    sampled = maj_at_k_one(answers, lambda a: a == "1", 6, max_subsets=400, seed=3)
    assert 0.0 < exact < 1.0
    assert sampled == pytest.approx(exact, abs=0.08)
    assert sampled == maj_at_k_one(answers, lambda a: a == "1", 6, max_subsets=400, seed=3)
