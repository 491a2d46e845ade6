"""Pure trusted-side pieces of the sandbox: codec, comparator, spec parsing, grading, filter."""

import math

import pytest

from rlvr.verifiers.code import extract_code
from rlvr.verifiers.sandbox import codec, seccomp
from rlvr.verifiers.sandbox.compare import case_passes, stdout_matches, values_equal
from rlvr.verifiers.sandbox.grade import Outcome, grade
from rlvr.verifiers.sandbox.spec import Case, parse_tests


def roundtrip(value):
    return codec.decode(codec.loads(codec.dumps(codec.encode(value))))


def test_codec_roundtrips_builtins_with_their_types():
    value = [1, 2.5, "x", None, True, (1, (2,)), {"a": [1]}, {(1, 2): 3}, {4, 5}, b"\x00",
             -(3 ** 20000)]
    back = roundtrip(value)
    assert back == value
    assert type(back[5]) is tuple and type(back[5][1]) is tuple
    assert math.isnan(roundtrip(float("nan"))) and roundtrip(float("-inf")) == float("-inf")


def test_codec_refuses_subclasses_and_unknown_types():
    class Sneaky(int):
        def __eq__(self, other):
            return True

    for value in (Sneaky(3), object(), [Sneaky(1)]):
        back = roundtrip(value)
        assert back != 3 and back != [1]
    assert isinstance(roundtrip(Sneaky(3)), codec.Bad)


def test_codec_rejects_bare_nan_literals_and_bad_tags():
    with pytest.raises(ValueError):
        codec.loads("NaN")
    assert isinstance(codec.decode({"zz": 1}), codec.Bad)
    assert isinstance(codec.decode({"t": 5}), codec.Bad)


@pytest.mark.parametrize("actual,expected,ok", [
    (True, 1, False), (1, True, False), (1, 1, True), (1.0, 1, True), (float("nan"), float("nan"), False),
    (0.1 + 0.2, 0.3, True), (0.31, 0.3, False), ((1, 2), [1, 2], True), ([1, 2], [1, 2, 3], False),
    ({"a": 1}, {"a": 1, "b": 2}, False), ({1, 2}, {2, 1}, True), ("1", 1, False), (None, 0, False),
    (codec.Bad("X"), 3, False), (float("inf"), float("inf"), True),
])
def test_values_equal_is_strict(actual, expected, ok):
    assert values_equal(actual, expected) is ok


def test_case_kinds():
    assert case_passes(["ok", 0.5000001], Case((), 0.5, "close", 1e-6))
    assert not case_passes(["ok", True], Case((), 1.0, "close", 1e-6))
    assert case_passes(["ok", True], Case((), True, "is")) and not case_passes(["ok", 1], Case((), True, "is"))
    assert case_passes(["ok", []], Case((), kind="falsy"))
    assert not case_passes(["ok", codec.Bad("X")], Case((), kind="truthy"))
    assert not case_passes(["exc", "SystemExit"], Case((), 1))


def test_stdout_needs_equal_lines_without_prefix_matching():
    assert stdout_matches("3 \n4\n\n", "3\n4")
    assert not stdout_matches("3\n", "3\n4\n")
    assert not stdout_matches("3\n4\n5\n", "3\n4\n")
    assert not stdout_matches("34", "3")


def test_assert_suite_becomes_cases_with_trusted_literals():
    spec = parse_tests({"entry_point": "f", "check": (
        "def check(candidate):\n    '''doc'''\n    import math\n    assert candidate(1, [2]) == (3, -1)\n"
        "    assert 4.0 == candidate(2)\n    assert candidate('a') is False\n    assert not candidate(0)\n"
        "    assert math.fabs(candidate(1.5) - 0.5) < 1e-6\n    assert True, 'debug'\n")})
    assert spec.kind == "call"
    assert spec.cases == (Case((1, [2]), (3, -1)), Case((2,), 4.0), Case(("a",), False, "is"),
                          Case((0,), kind="falsy"), Case((1.5,), 0.5, "close", 1e-6))
    assert "expected" not in str(spec.payload("code")) and "(3, -1)" not in str(spec.payload("code"))


def test_non_literal_asserts_stay_a_check_suite():
    src = "def check(candidate):\n    for i in range(3):\n        assert candidate(i) == i\n"
    spec = parse_tests({"entry_point": "f", "check": src})
    assert spec.kind == "check" and spec.check == src
    assert spec.payload("code") == {"code": "code", "entry": "f"}  # the source goes as a blob
    src = "def check(candidate):\n    assert candidate(1) == 1\n    assert candidate(len('ab')) == 2\n"
    assert parse_tests({"entry_point": "f", "check": src}).kind == "check"


@pytest.mark.parametrize("tests", [None, [], {"cases": []}, {"entry_point": "1x", "cases": [{}]},
                                   {"entry_point": "f", "cases": [{"args": 1, "expected": 2}]},
                                   {"stdio": [{"input": 1, "output": "x"}]},
                                   {"entry_point": "f", "check": "def check(:"}])
def test_malformed_specs_raise(tests):
    with pytest.raises(ValueError):
        parse_tests(tests)


def reply(out, status="exit", code=0):
    return {"status": status, "code": code, "out": out}


def test_grade_counts_in_order_and_rejects_forged_streams():
    spec = parse_tests({"entry_point": "f", "cases": [{"args": [1], "expected": 2},
                                                      {"args": [2], "expected": 4}]})
    good = '["case",0,["ok",2]]\n["case",1,["ok",4]]\n["done"]\n'
    assert grade(spec, reply(good)) == Outcome(2, 2, ())
    assert grade(spec, reply(good.replace("4]", "5]"))).passed == 1
    forged = '["case",0,["ok",2]]\n' + good
    assert grade(spec, reply(forged)).passed == 0 and grade(spec, reply(forged)).flags == ("crash",)
    assert grade(spec, reply('["case",0,["ok",2]]\n', code=0)).flags == ("crash",)
    assert grade(spec, reply("", status="timeout", code=-9)).flags == ("timeout",)


def test_extract_takes_last_complete_python_block():
    text = "```python\nx = 1\n```\nthen\n```\ny = 2\n```\n```bash\nls\n```\n```python\nz = 3"
    assert extract_code(text) == "y = 2"
    assert extract_code("no fences") is None and extract_code("```\n\n```") is None


def test_seccomp_filter_jumps_stay_inside_the_program():
    prog = seccomp.build_filter([123])
    for i, (code, jt, jf, _) in enumerate(prog):
        if code & 0x07 == 0x05:  # BPF_JMP
            assert i + 1 + max(jt, jf) < len(prog)
    assert prog[-1] == (0x06, 0, 0, seccomp.RET_ALLOW)


def test_absurd_nesting_is_a_value_error_or_bad():
    with pytest.raises(ValueError):
        codec.loads("[" * 100000 + "]" * 100000)
    deep = []
    for _ in range(100000):
        deep = [deep]
    assert isinstance(codec.decode(deep), codec.Bad)
