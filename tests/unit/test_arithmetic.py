import random

from rlvr.tasks.arithmetic import ArithmeticTask, ArithmeticVerifier, is_heldout, make_problem, solve


def test_trace_format_matches_the_written_method():
    assert solve(347, 285, "+") == "7+5+0=12|4+8+1=13|3+2+1=06|>632"
    assert solve(999, 1, "+") == "9+1+0=10|9+0+1=10|9+0+1=10|>1000"
    assert solve(903, 458, "-") == "3-8-0=15|0-5-1=14|9-4-1=04|>445"
    assert solve(100, 99, "-").endswith(">1")


def test_traces_are_correct_for_many_problems():
    rng = random.Random(0)
    for _ in range(2000):
        a, b = rng.randint(0, 99999), rng.randint(0, 99999)
        assert solve(a, b, "+").rsplit(">", 1)[1] == str(a + b)
        hi, lo = max(a, b), min(a, b)
        assert solve(hi, lo, "-").rsplit(">", 1)[1] == str(hi - lo)


def test_splits_are_disjoint_and_heldout_is_fixed():
    task = ArithmeticTask(3, "+-")
    held = task.heldout(300)
    assert len({p.id for p in held}) == 300
    assert held == task.heldout(300)
    train = task.sample(random.Random(1), 2000)
    assert not {p.id for p in train} & {p.id for p in held}
    assert all(not is_heldout(p.id) for p in train)


def test_verifier_is_strict_about_the_final_answer():
    p = make_problem(347, 285, "+")
    v = ArithmeticVerifier()
    cases = {
        "7+5+0=12|4+8+1=13|3+2+1=06|>632": 1.0,
        ">632": 1.0,
        "632": 0.0,                      # no answer marker
        ">633": 0.0,
        ">632>631": 0.0,                 # only the text after the last marker counts
        ">631>632": 1.0,
        ">632 631": 0.0,                 # two answers in the final region
        ">0632": 0.0,
        ">": 0.0,
        ">-632": 0.0,
    }
    scores = v.score_batch(list(cases), [p] * len(cases))
    assert [s.reward for s in scores] == list(cases.values())
    assert scores[2].flags == ("no_answer",)
    assert scores[6].flags == ("multiple_answers",)
    assert scores[0].correct and not scores[3].correct
