"""`rlvr verify` (offline.main): scoring files, keeping keys, summaries, and one-line errors."""

from __future__ import annotations

import json

import pytest

from rlvr.verifiers.offline import main


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_math_file_is_scored_with_other_keys_kept(tmp_path, capsys):
    src = _write(tmp_path / "in.jsonl", [
        {"id": 1, "response": "so \\boxed{1,000}", "reference": "1000"},
        {"id": 2, "response": "\\boxed{3} or \\boxed{4}", "reference": "3"},
        {"id": 3, "response": "no idea", "reference": "3"},
        {"id": 4, "response": "<answer>7</answer>", "reference": 7, "extract": "answer_tag"},
    ])
    out = tmp_path / "out.jsonl"
    assert main(["--verifier", "math", "--input", str(src), "--output", str(out), "--no-progress"]) == 0
    rows = _read(out)
    assert [r["id"] for r in rows] == [1, 2, 3, 4]
    assert [r["reward"] for r in rows] == [1.0, 0.0, 0.0, 1.0]
    assert [r["flags"] for r in rows] == [[], ["multiple_answers"], ["no_answer"], []]
    assert rows[0]["extracted"] == "1000" and all(r["ms"] >= 0 for r in rows)
    summary = capsys.readouterr().out
    assert "rows=4 correct=2 (50.0%)" in summary and "multiple_answers=1" in summary


def test_constraints_file_and_options(tmp_path):
    src = _write(tmp_path / "in.jsonl", [
        {"response": "short answer", "constraints": [{"type": "word_count", "args": {"relation": "at most", "n": 3}}]},
        {"response": "a, b", "constraints": [{"type": "no_commas"}, {"type": "word_count",
                                                                      "args": {"relation": "at most", "n": 3}}]},
    ])
    out = tmp_path / "out.jsonl"
    assert main(["--verifier", "constraints", "--input", str(src), "--output", str(out),
                 "--option", "reward=fraction", "--no-progress"]) == 0
    rows = _read(out)
    assert [r["reward"] for r in rows] == [1.0, 0.5] and rows[1]["failed"] == ["no_commas"]


@pytest.mark.parametrize("rows,verifier,message", [
    (['{"response": "x", "reference": "1"}', "{not json"], "math", "in.jsonl:2: invalid JSON"),
    ([{"response": "x"}], "math", "in.jsonl:1: missing field 'reference'"),
    ([{"reference": "1"}], "math", "in.jsonl:1: missing field 'response'"),
    ([{"response": 3, "reference": "1"}], "math", "in.jsonl:1: field 'response' must be a string"),
    (["[1, 2]"], "math", "in.jsonl:1: a row must be a JSON object"),
])
def test_bad_input_is_one_line_exit_2_and_no_output(tmp_path, capsys, rows, verifier, message):
    src = _write(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert main(["--verifier", verifier, "--input", str(src), "--output", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == [src]


def test_rows_with_unusable_references_score_zero_and_the_rest_is_scored(tmp_path):
    """Issue 17: one bad reference flags its row (`bad_reference`, reward 0), not the whole file;
    a reference math-verify reads (solutions with \\pm joined by commas) is scored as usual."""
    src = _write(tmp_path / "in.jsonl", [
        {"response": "\\boxed{3}", "reference": "3"},
        {"response": "\\boxed{3}", "reference": ""},
        {"response": "\\boxed{3}", "reference": "\\frac{"},
        {"response": "\\boxed{3, 1+\\sqrt{2}, 1-\\sqrt{2}}", "reference": "1 \\pm \\sqrt{2}, 3"},
    ])
    out = tmp_path / "out.jsonl"
    assert main(["--verifier", "math", "--input", str(src), "--output", str(out), "--no-progress"]) == 0
    rows = _read(out)
    assert [r["reward"] for r in rows] == [1.0, 0.0, 0.0, 1.0]
    assert [r["flags"] for r in rows] == [[], ["bad_reference"], ["bad_reference"], []]
    assert "field 'reference'" in rows[1]["failed"] and "field 'reference'" in rows[2]["failed"]
    src = _write(tmp_path / "c.jsonl", [{"response": "x", "constraints": [{"type": "nope"}]}])
    assert main(["--verifier", "constraints", "--input", str(src), "--output", str(out),
                 "--no-progress"]) == 0
    assert _read(out)[0]["flags"] == ["bad_reference"]


def test_unknown_verifier_and_missing_file_are_user_errors(tmp_path, capsys):
    out = str(tmp_path / "o.jsonl")
    assert main(["--verifier", "nope", "--input", str(tmp_path / "x"), "--output", out]) == 2
    assert "unknown verifier 'nope'" in capsys.readouterr().err
    assert main(["--verifier", "format", "--input", str(tmp_path / "missing.jsonl"), "--output", out]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_ten_thousand_rows_with_progress_and_summary(tmp_path, capsys):
    rows = [{"response": f"Work... \\boxed{{{i % 97}}}", "reference": str(i % 89)} for i in range(10_000)]
    src = _write(tmp_path / "big.jsonl", rows)
    out = tmp_path / "big_out.jsonl"
    assert main(["--verifier", "math", "--input", str(src), "--output", str(out)]) == 0
    scored = _read(out)
    assert len(scored) == 10_000
    expected = sum(i % 97 == i % 89 for i in range(10_000))
    assert sum(r["correct"] for r in scored) == expected
    assert f"rows=10000 correct={expected}" in capsys.readouterr().out
