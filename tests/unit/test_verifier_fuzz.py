"""Property-based fuzzing (hypothesis) of every verifier: no exception escapes, no check overruns.

Each example is a batch (a group, as the training loop sends it): hypothesis draws a seeded random
source and some text, and the batch is built from them, so that max_examples × batch size inputs
are generated per verifier at a small cost per input; `test_zz_each_verifier_saw_ten_thousand_inputs` checks the
count when the fuzz tests ran. Beyond "no crash", the properties pin down invariants: rewards are
0/1 for math and `correct` means reward 1; the constraint fraction is the mean of the results; a
well-formed response passes the format check; the overlong penalty is in [-1, 0] and monotone.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rlvr.types import Problem, Score
from rlvr.verifiers.constraints import CHECKS, ConstraintsVerifier
from rlvr.verifiers.format import FormatVerifier
from rlvr.verifiers.math import MathVerifier
from rlvr.verifiers.shaping import language_consistency, soft_overlong_penalty

BATCH = 25
EXAMPLES = 400          # × BATCH = 10,000 inputs per verifier
BUDGET_S = 1.0
SEEN: Counter = Counter()
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MATH_FLAGS = {"no_answer", "multiple_answers", "timeout", "crash", "too_long", "bad_reference"}

REFERENCES = ["3", "-7", "0.5", "\\frac{2}{3}", "1,000", "25\\%", "\\sqrt{2}", "2\\pi", "(0, 1]",
              "\\{1, 2\\}", "x = 4", "\\begin{pmatrix}1 \\\\ 2\\end{pmatrix}"]
LATEX = ["\\sqrt{2}", "2\\pi", "x^2+1", "\\frac{\\sqrt{3}}{2}", "(0,1]", "\\{1,2\\}", "x = 4", "\\infty",
         "e^{i\\pi}", "9^{9^{9}}", "\\frac{1}{0}", "", "\\boxed{", "}", "\\left(", "3 or 4", "\\text{yes}",
         "1,2,3", "\\frac23", "0.\\overline{6}", "2/3", "\\$1,000", "25 percent", "-\\infty", "\\{2\\}"]
SOUP = list("0123456789xy+-*/^_()[]{}\\$%,.=<> ") + ["\\frac", "\\sqrt", "\\pi", "\\boxed{", "\\text{", "or"]
WORDS = ["so", "we", "get", "the answer is", "Therefore", "$x$", "=", "\n\n", "<think>", "</think>", "**",
         "Final Answer:", "step", "3", "12", "\\(", "\\)", "\\[", "\\]", "and", "then"]
WRAPS = ["\\boxed{%s}", "<answer>%s</answer>", "The answer is %s.", "$%s$", "%s", "<think>%s</think>",
         "\\boxed{%s} \\boxed{%s}", "<think>x</think>\\fbox{%s}", "\\boxed %s", "Answer: %s or %s"]


def _terminates(f) -> bool:
    d = f.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def _number(rnd) -> str:
    n = rnd.randint(-10**6, 10**6)
    return rnd.choice([str(n), f"{n:,}", f"{n / 1000:.3f}", f"\\frac{{{n}}}{{{rnd.randint(1, 60)}}}",
                       f"{abs(n) % 100}\\%", f"{n}/{rnd.randint(1, 9)}"])


def _answer(rnd, text: str) -> str:
    # Mostly numbers, as in real rollouts; the rest reach sympy, which is slow, so fewer of them.
    roll = rnd.random()
    if roll < 0.95:
        return _number(rnd)
    if roll < 0.98:
        return rnd.choice(LATEX)
    if roll < 0.99:
        return "".join(rnd.choice(SOUP) for _ in range(rnd.randint(1, 6)))
    return text


def _math_response(rnd, text: str) -> str:
    wrap = rnd.choice(WRAPS)
    body = wrap % tuple(_answer(rnd, text) for _ in range(wrap.count("%s")))
    prose = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(0, 12)))
    return prose + " " + body + (" " + text if rnd.random() < 0.1 else "")


@pytest.fixture(scope="module")
def math_verifier():
    v = MathVerifier(timeout_s=BUDGET_S, workers=2)
    yield v
    v.close()


def _check_math_score(score: Score) -> None:
    assert isinstance(score, Score) and score.reward in (0.0, 1.0)
    assert score.correct == (score.reward == 1.0) and set(score.flags) <= MATH_FLAGS
    assert (score.details or {}).get("ms", 0) <= BUDGET_S * 1000 + 300


def test_fuzz_math(math_verifier):
    @FUZZ
    @given(st.randoms(use_true_random=False), st.text(max_size=12), st.sampled_from(REFERENCES))
    def run(rnd, text, reference):
        responses = [_math_response(rnd, text) for _ in range(BATCH)]
        scores = math_verifier.score_batch(responses, [Problem("f", "", reference)] * len(responses))
        assert len(scores) == len(responses)
        for score in scores:
            _check_math_score(score)
        SEEN["math"] += len(responses)

    run()


@settings(max_examples=300, deadline=None, database=None)
@given(st.integers(-10**12, 10**12), st.integers(1, 10**6))
def test_math_integers_match_exactly_in_any_spelling(n, delta):
    v = MathVerifier(workers=1)  # the fast path never starts a worker
    assert v.score(f"so \\boxed{{{n:,}}}", str(n)).correct
    assert v.score(f"The answer is ${n}$.", f"{n:,}").correct
    assert not v.score(f"\\boxed{{{n + delta}}}", str(n)).correct
    assert v.pool._count == 0


@settings(max_examples=300, deadline=None, database=None)
@given(st.fractions(min_value=-1000, max_value=1000, max_denominator=400))
def test_math_fractions_equal_their_decimals(f):
    v = MathVerifier(workers=1)
    frac = f"\\frac{{{f.numerator}}}{{{f.denominator}}}"
    decimal = f"{float(f):.6f}"
    # A terminating fraction must be written exactly (3 ≠ 3.0000001); 6 places may not reach it.
    assume(not _terminates(f) or (f * 10**6).denominator == 1)
    assert v.score(f"\\boxed{{{decimal}}}", frac).correct
    assert not v.score(f"\\boxed{{{float(f) + 0.01:.6f}}}", frac).correct


RELATIONS = st.sampled_from(["at most", "at least", "exactly", "less than", "more than"])
KEYWORD = st.text(min_size=1, max_size=6).filter(str.strip)  # a blank keyword is a bad spec
CONSTRAINT = st.one_of(
    st.builds(lambda t, r, n: {"type": t, "args": {"relation": r, "n": n}},
              st.sampled_from(["word_count", "sentence_count", "paragraph_count", "bullet_count"]), RELATIONS,
              st.integers(0, 50)),
    st.builds(lambda k: {"type": "keywords_include", "args": {"keywords": k}}, st.lists(KEYWORD, max_size=3)),
    st.builds(lambda k: {"type": "keywords_exclude", "args": {"keywords": k}}, st.lists(KEYWORD, max_size=3)),
    st.builds(lambda k, r, n: {"type": "keyword_frequency", "args": {"keyword": k, "relation": r, "n": n}},
              KEYWORD, RELATIONS, st.integers(0, 5)),
    st.builds(lambda c: {"type": "letter_case", "args": {"case": c}}, st.sampled_from(["lower", "upper"])),
    st.builds(lambda t: {"type": "starts_with", "args": {"text": t}}, st.text(max_size=5)),
    st.builds(lambda t: {"type": "ends_with", "args": {"text": t}}, st.text(max_size=5)),
    st.builds(lambda k: {"type": "json_format", "args": {"required_keys": k}}, st.lists(st.text(max_size=4), max_size=2)),
    # The language check was drawn rarely when it cost 10-30 ms a text (langdetect); kept so.
    st.sampled_from([{"type": "no_commas"}, {"type": "title"}, {"type": "placeholders", "args": {"n": 2}},
                     {"type": "section_count", "args": {"relation": "at least", "n": 2}}] * 6
                    + [{"type": "language", "args": {"language": "en"}}]),
)
PIECES = ["Hello", "world", ",", ".", "!", "?", "\n", "\n\n", "* item", "- item", "[name]", "***", "SECTION 1",
          "Section 2", "<<Title>>", "{\"a\": 1}", "```json", "```", "le chat", "的", "Привет", "UPPER", "lower", " "]


def _text(rnd, text: str) -> str:
    return "".join(rnd.choice(PIECES + [text]) + rnd.choice(["", " "]) for _ in range(rnd.randint(0, 30)))


def test_fuzz_constraints():
    v = ConstraintsVerifier(reward="fraction")

    @FUZZ
    @given(st.randoms(use_true_random=False), st.text(max_size=20), st.lists(CONSTRAINT, min_size=1, max_size=4))
    def run(rnd, text, constraints):
        responses = [_text(rnd, text) for _ in range(BATCH)]
        problem = Problem("c", "", None, "constraints", {"constraints": constraints})
        v.check_reference(problem)
        for score in v.score_batch(responses, [problem] * len(responses)):
            results = score.details["results"]
            assert score.reward == pytest.approx(sum(results) / len(results))
            assert score.correct == all(results) and len(results) == len(constraints)
        SEEN["constraints"] += len(responses)

    run()


TAGS = ["<think>", "</think>", "<answer>", "</answer>", "\\boxed{", "}", "x", " ", "\n"]


def test_fuzz_format():
    v = FormatVerifier()

    @FUZZ
    @given(st.randoms(use_true_random=False), st.text(max_size=4),
           st.text(min_size=1, max_size=20).filter(lambda s: s.strip() and "<" not in s),
           st.text(min_size=1, max_size=10).filter(lambda s: s.strip() and "<" not in s))
    def run(rnd, text, thought, answer):
        responses = ["".join(rnd.choice(TAGS + [text]) for _ in range(rnd.randint(0, 12))) for _ in range(BATCH)]
        well_formed = f"<think>{thought}</think>\n<answer>{answer}</answer>"
        scores = v.score_batch(responses + [well_formed], [Problem("f", "")] * (len(responses) + 1))
        assert all(s.reward in (0.0, 1.0) for s in scores)
        assert scores[-1].correct, scores[-1].details
        SEEN["format"] += len(responses) + 1

    run()


def test_fuzz_shaping():
    @FUZZ
    @given(st.lists(st.integers(0, 10_000), min_size=BATCH, max_size=BATCH), st.integers(1, 5000),
           st.integers(0, 1000), st.text(max_size=60))
    def run(lengths, max_length, cache_length, text):
        penalties = [soft_overlong_penalty(n, max_length, cache_length) for n in sorted(lengths)]
        assert all(-1.0 <= p <= 0.0 for p in penalties)
        assert all(a >= b for a, b in zip(penalties, penalties[1:]))
        assert 0.0 <= language_consistency(text, "en") <= 1.0
        SEEN["shaping"] += len(lengths)

    run()


def test_zz_each_verifier_saw_ten_thousand_inputs():
    if not SEEN:
        pytest.skip("the fuzz tests did not run in this session")
    assert all(SEEN[name] >= 10_000 for name in ("math", "constraints", "format", "shaping")), SEEN
    assert set(CHECKS) >= {"word_count", "json_format", "language"}
