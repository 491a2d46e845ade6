"""CodeVerifier end to end through the real sandbox (strongest tier here): rewards, flags, cache."""

import pytest

from rlvr.types import Problem
from rlvr.verifiers.base import get_verifier
from rlvr.verifiers.code import CodeSpec, CodeVerifier
from rlvr.verifiers.sandbox import SandboxUnavailable, probe

# x * 2 passes the first two cases and fails the last: the job is stopped at its first failing case,
# so with the failure last its passed count (2) does not depend on how fast the stop lands.
CASES = {"entry_point": "sq", "cases": [{"args": [2], "expected": 4}, {"args": [0], "expected": 0},
                                        {"args": [-3], "expected": 9}]}


def fenced(code):
    return f"Here you go:\n```python\n{code}\n```\n"


@pytest.fixture(scope="module")
def verifier():
    if probe().tier not in ("bwrap", "landlock"):
        pytest.skip("no isolation tier on this machine")
    v = get_verifier("code", timeout_s=3.0, workers=2)  # generous: the machine is shared
    yield v
    v.close()


def test_rewards_and_flags(verifier):
    p = Problem("sq", "", CASES, "code")
    responses = [fenced("def sq(x):\n    return x * x"), fenced("def sq(x):\n    return x * 2"),
                 fenced("def sq(x):\n    raise ValueError"), fenced("import time\ntime.sleep(5)"),
                 "I would square it.", fenced("def sq(x):\n    return x ** 2.0")]
    scores = verifier.score_batch(responses, [p] * len(responses))
    assert [s.reward for s in scores] == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert [s.flags for s in scores] == [(), (), ("crash",), ("timeout",), ("no_code",), ()]
    assert scores[1].details["passed"] == 2 and scores[1].details["total"] == 3
    assert verifier.metrics()["sandbox/tier"] == verifier.tier
    assert verifier.metrics()["sandbox/preferred_tier"] == float(verifier.tier == "bwrap")


def test_hidden_tests_decide_and_visible_are_reported(verifier):
    hidden = {"entry_point": "sq", "cases": [{"args": [5], "expected": 25}]}
    p = Problem("h", "", {"entry_point": "sq", "cases": [{"args": [2], "expected": 4}]}, "code",
                {"hidden_tests": hidden})
    cheat, honest = fenced("def sq(x):\n    return 4"), fenced("def sq(x):\n    return x * x")
    s_cheat, s_honest = verifier.score_batch([cheat, honest], [p, p])
    assert (s_cheat.reward, s_cheat.details["visible_passed"]) == (0.0, 1)
    assert (s_honest.reward, s_honest.details["tests"]) == (1.0, "hidden")


def test_stdio_and_check_formats(verifier):
    stdio = Problem("io", "", {"stdio": [{"input": "3\n", "output": "9\n"},
                                         {"input": "4\n", "output": "16"}]}, "code")
    check = Problem("ck", "", {"entry_point": "sq", "check": (
        "def check(candidate):\n    for i in range(-3, 4):\n        assert candidate(i) == i * i\n")},
        "code")
    io_prog = fenced("n = int(input())\nprint(n * n)")
    sq = fenced("def sq(x):\n    return x * x")
    scores = verifier.score_batch([io_prog, sq, sq, fenced("def sq(x):\n    return abs(x) * 3")],
                                  [stdio, stdio, check, check])
    assert [s.reward for s in scores] == [1.0, 0.0, 1.0, 0.0]


def test_fraction_reward_counts_every_case():
    v = CodeVerifier(CodeSpec(reward="fraction", timeout_s=1.0, workers=1))
    try:
        [s] = v.score_batch([fenced("def sq(x):\n    return x * 2")],
                            [Problem("f", "", CASES, "code")])
    finally:
        v.close()
    assert s.reward == pytest.approx(2 / 3) and not s.correct


def test_identical_responses_run_once(verifier):
    p = Problem("dup", "", CASES, "code")
    before = dict(verifier.counts)
    scores = verifier.score_batch([fenced("def sq(x):\n    return x*x")] * 8, [p] * 8)
    assert all(s.reward == 1.0 for s in scores)
    assert verifier.counts["jobs"] - before["jobs"] == 1
    assert verifier.counts["cache_hits"] - before["cache_hits"] == 7


def test_check_reference_names_the_problem(verifier):
    with pytest.raises(ValueError, match="bad-7"):
        verifier.check_reference(Problem("bad-7", "", {"entry_point": "f"}, "code"))
    with pytest.raises(ValueError, match="hidden"):
        verifier.check_reference(Problem("bad-8", "", CASES, "code", {"hidden_tests": {"stdio": []}}))
    verifier.check_reference(Problem("ok", "", CASES, "code"))


def test_refuses_to_run_without_isolation_unless_allowed():
    with pytest.raises(SandboxUnavailable):
        CodeVerifier(CodeSpec(tier="rlimits"))


def test_binary_reward_stops_at_the_first_failing_case(verifier):
    slow_cases = {"entry_point": "sq", "cases": [{"args": [i], "expected": i * i} for i in range(6)]}
    p = Problem("stop", "", slow_cases, "code")
    # Wrong from case 0, 0.8 s per case: running all 6 cases would overrun the 3 s timeout.
    code = fenced("import time\ndef sq(x):\n    time.sleep(0.8)\n    return -1")
    [s] = verifier.score_batch([code], [p])
    assert s.flags == () and s.details["passed"] == 0 and s.reward == 0.0


def test_offline_rows_may_carry_the_spec_as_tests(verifier):
    row = Problem("in.jsonl:3", "", None, "code", {"tests": CASES})
    [s] = verifier.score_batch([fenced("def sq(x):\n    return x * x")], [row])
    assert s.reward == 1.0
    with pytest.raises(ValueError, match="in.jsonl:4"):
        verifier.check_reference(Problem("in.jsonl:4", "", None, "code", {}))


def test_cpu_budget_decides_timeouts_under_a_longer_wall_cap():
    v = CodeVerifier(CodeSpec(timeout_s=5.0, cpu_s=0.5, workers=1))
    p = Problem("cpu", "", CASES, "code")
    spin = fenced("def sq(x):\n    while True:\n        pass")
    sleepy = fenced("import time\ndef sq(x):\n    time.sleep(0.3)\n    return x * x")
    try:
        spun, slept = v.score_batch([spin, sleepy], [p, p])
    finally:
        v.close()
    assert spun.flags == ("timeout",) and spun.details["passed"] == 0
    assert slept.reward == 1.0  # 0.9 s of wall time, almost no CPU


def test_test_sets_shared_across_problems_run_once_without_deadlock():
    a = {"entry_point": "sq", "cases": [{"args": [3], "expected": 9}]}
    b = {"entry_point": "sq", "cases": [{"args": [4], "expected": 16}]}
    v = CodeVerifier(CodeSpec(timeout_s=1.0, workers=1))
    try:
        code = fenced("import time\ndef sq(x):\n    time.sleep(0.1)\n    return x * x")
        probs = [Problem("p", "", a, "code", {"hidden_tests": b}),
                 Problem("q", "", b, "code", {"hidden_tests": a})] * 2
        scores = v.score_batch([code] * 4, probs)
        assert [s.reward for s in scores] == [1.0] * 4
        assert v.counts["jobs"] == 2 and v.counts["cache_hits"] == 6
    finally:
        v.close()


def test_start_banner_names_the_tier_and_why(verifier):
    """A weaker tier is never silent: the run's first lines say which tier grades and why bwrap
    does not (a host without /dev/full once moved every job to landlock without a word)."""
    import torch

    from rlvr.config import Config
    from rlvr.training.banner import banner

    text = banner(Config(), "cpu", torch.nn.Linear(2, 2), {"code": verifier}, [], [])
    assert f"  sandbox: {verifier.tier}" in text.splitlines()
    if probe("landlock").tier == "landlock":
        forced = CodeVerifier(CodeSpec(tier="landlock", workers=1))
        try:
            assert forced.sandbox_line() == "sandbox: landlock (not bwrap: tier landlock asked for)"
        finally:
            forced.close()
