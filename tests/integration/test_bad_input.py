"""Malformed input stops `rlvr train` before anything runs: exit 2, one line naming it, no run dir."""

from __future__ import annotations

import json

import pytest

from rlvr.cli.main import main

GOOD_ROW = {"prompt": "12+34=", "reference": "46", "verifier": "arithmetic"}


def _jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _config(tmp_path, data=None, extra=""):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"run: {{dir: {tmp_path / 'run'}, progress: false, threads: 1}}\n"
        "model: {path: builtin:tiny-llama}\n"
        f"data: {{task: '', train_path: {data or tmp_path / 'train.jsonl'}}}\n"
        "grpo: {steps: 1, group_size: 2, prompts_per_step: 1}\n" + extra)
    return cfg


DATA_CASES = {
    "empty_file": ([], "no problems (the file is empty)", None),
    "invalid_json": (["{\"prompt\": "], "invalid JSON", 1),
    "not_an_object": (["[1, 2]"], "a row must be a JSON object", 1),
    "missing_prompt": ([{"reference": "1", "verifier": "arithmetic"}], "missing field 'prompt'", 1),
    "empty_prompt": ([{**GOOD_ROW, "prompt": "  "}], "field 'prompt' is empty", 1),
    "prompt_wrong_type": ([{**GOOD_ROW, "prompt": 12}], "field 'prompt' must be a string", 1),
    "bad_message": ([{**GOOD_ROW, "prompt": [{"role": "robot", "content": "hi"}]}], "prompt[0]", 1),
    "message_no_content": ([{**GOOD_ROW, "prompt": [{"role": "user"}]}], "prompt[0]", 1),
    "duplicate_id": ([{**GOOD_ROW, "id": "a"}, {**GOOD_ROW, "id": "a"}], "duplicate id 'a'", 2),
    "bad_id_type": ([{**GOOD_ROW, "id": [1]}], "field 'id'", 1),
    "metadata_not_mapping": ([{**GOOD_ROW, "metadata": [1]}], "field 'metadata' must be a mapping", 1),
    "unknown_verifier": ([{**GOOD_ROW, "verifier": "telepathy"}], "unknown verifier 'telepathy'", 1),
    "no_verifier": ([{"prompt": "1+1="}], "field 'verifier' is missing", 1),
    "bad_reference": ([GOOD_ROW, {**GOOD_ROW, "id": "x", "reference": "forty"}], "field 'reference'", 2),
    "second_line_bad": ([GOOD_ROW, "not json"], "invalid JSON", 2),
}


@pytest.mark.parametrize("case", sorted(DATA_CASES))
def test_bad_dataset_rows(tmp_path, capsys, case):
    rows, needle, line = DATA_CASES[case]
    data = _jsonl(tmp_path / "train.jsonl", rows)
    code = main(["train", str(_config(tmp_path, data))])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert needle in err
    if line is not None:
        assert f"train.jsonl:{line}" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_data_file_that_is_not_utf8(tmp_path, capsys):
    data = tmp_path / "train.jsonl"
    data.write_bytes(json.dumps(GOOD_ROW).encode() + b"\n" + '{"prompt": "caf\u00e9"}\n'.encode("latin-1"))
    code = main(["train", str(_config(tmp_path, data))])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "train.jsonl:2" in err and "not UTF-8" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "run").exists()


def test_code_row_in_an_unsupported_shipped_form(tmp_path, capsys):
    row = {"question": "Add.", "input_output": json.dumps({"fn_name": "f", "inputs": [[1]], "outputs": [[2]]})}
    data = _jsonl(tmp_path / "train.jsonl", [row])
    code = main(["train", str(_config(tmp_path, data)), "data.verifier=code", "data.prompt_field=question"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "train.jsonl:1" in err and "fn_name" in err, err
    assert not (tmp_path / "run").exists()


CONFIG_CASES = {
    "unknown_key": (["grpo.nonsense=1"], "unknown config key 'grpo.nonsense'"),
    "group_size": (["grpo.group_size=1"], "grpo.group_size"),
    "lr_zero": (["grpo.lr=0"], "grpo.lr"),
    "clip_inverted": (["grpo.eps_low=1.2"], "grpo.eps_low"),
    "bad_choice": (["grpo.advantage=median"], "allowed: group, batch, none, rloo"),
    "missing_model": (["model.path=/nonexistent/model"], "model.path: /nonexistent/model does not exist"),
    "missing_data": (["data.train_path=/nonexistent.jsonl"], "file not found"),
    "bad_task": (["data.task=chess"], "data.task"),
    "engine_extra": (["rollout.engine=vllm"], "rollout.engine"),
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_bad_config(tmp_path, capsys, case):
    overrides, needle = CONFIG_CASES[case]
    _jsonl(tmp_path / "train.jsonl", [GOOD_ROW])
    code = main(["train", str(_config(tmp_path)), *overrides])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert needle in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_debug_flag_shows_the_traceback(tmp_path):
    _jsonl(tmp_path / "train.jsonl", [GOOD_ROW])
    with pytest.raises(Exception, match="grpo.group_size"):
        main(["--debug", "train", str(_config(tmp_path)), "grpo.group_size=1"])


def test_missing_config_file(tmp_path, capsys):
    assert main(["train", str(tmp_path / "none.yaml")]) == 2
    assert "config file not found" in capsys.readouterr().err


def test_verify_subcommand_is_wired(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    _jsonl(src, [{"response": "so \\boxed{5}", "reference": "5"}, {"response": "3 or 4", "reference": "3"}])
    assert main(["verify", "--verifier", "math", "--input", str(src), "--output",
                 str(tmp_path / "out.jsonl"), "--no-progress"]) == 0
    rows = [json.loads(l) for l in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["reward"] for r in rows] == [1.0, 0.0]
