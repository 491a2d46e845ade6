"""Data as users name it: hub layouts read through `datasets.load_dataset` offline, the public
formats as they ship (GSM8K, MATH, problem/answer, MAWPS), column maps, templates, and hub ids that
cannot load failing at once. Folders are written in tmp_path in the hub's layout; the real GSM8K
and MAWPS files come from ../shared/data (skipped when absent)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlvr.data import SourceSpec, load_problems
from rlvr.data.formats import gsm8k_answer, last_boxed
from rlvr.errors import DataError, UserError
from rlvr.testing.hub_layout import write_hub_layout

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
GSM8K = SHARED / "gsm8k" / "train.jsonl"


def hub_gsm8k(folder: Path, rows: list[dict]) -> Path:
    return write_hub_layout(folder, {"train": rows}, "main")


def gsm8k_rows(n: int | None = None) -> list[dict]:
    if not GSM8K.exists():
        pytest.skip("../shared/data/gsm8k is absent")
    lines = GSM8K.read_text().splitlines()
    return [json.loads(line) for line in (lines[:n] if n else lines)]


def test_gsm8k_in_the_hubs_layout_loads_as_datasets_reads_it(tmp_path):
    import datasets

    folder = hub_gsm8k(tmp_path / "gsm8k", gsm8k_rows())
    problems = load_problems(str(folder), spec=SourceSpec(config="main"))
    hub = datasets.load_dataset(str(folder), name="main", split="train")
    assert len(problems) == len(hub) == 7473
    assert [p.prompt for p in problems[:20]] == hub["question"][:20]
    first = problems[0]
    assert (first.reference, first.verifier) == ("72", "math")
    assert "<<" not in first.metadata["answer"] and first.metadata["answer"].endswith("#### 72")
    # thousands separators: every reference with a comma in the shipped answer is a plain integer
    commas = [(p, a) for p, a in zip(problems, hub["answer"]) if "," in a.rsplit("####", 1)[1]]
    assert commas and all(p.reference == a.rsplit("####", 1)[1].strip().replace(",", "")
                          and p.reference.isdigit() for p, a in commas)


def test_math_style_folder_takes_the_last_box_with_nested_braces(tmp_path):
    rows = [{"problem": "Half of one?", "solution": "First \\boxed{2}, no: $\\boxed{\\frac{1}{2}}$."},
            {"problem": "Set?", "solution": "So \\boxed{\\{1, 2\\}}"}]
    (tmp_path / "math" / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "math" / "data" / "train-00000-of-00001.parquet")
    problems = load_problems(str(tmp_path / "math"))
    assert [p.reference for p in problems] == ["\\frac{1}{2}", "\\{1, 2\\}"]
    assert {p.verifier for p in problems} == {"math"}


def test_config_split_folder_without_a_card_and_problem_answer_rows(tmp_path):
    (tmp_path / "pa" / "easy").mkdir(parents=True)
    for split, n in (("train", 3), ("test", 2)):
        rows = [{"problem": f"{i}+1=?", "answer": str(i + 1)} for i in range(n)]
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "pa" / "easy" / f"{split}-00000-of-00001.parquet")
    train = load_problems(str(tmp_path / "pa"), spec=SourceSpec(config="easy"))
    test = load_problems(str(tmp_path / "pa"), spec=SourceSpec(config="easy", split="test"))
    assert [p.reference for p in train] == ["1", "2", "3"] and len(test) == 2


def test_column_map_extractor_template_and_system_prompt(tmp_path):
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps({"q": "2+2?", "sol": "2+2=<<2+2=4>>4\n#### 4", "k": "id-1"}) + "\n")
    spec = SourceSpec(columns={"prompt": "q", "reference": "sol", "id": "k"}, extractor="gsm8k",
                      template="{prompt} Put the final answer in \\boxed{}.", system="Think first.")
    (p,) = load_problems(path, "math", spec=spec)
    assert (p.id, p.reference) == ("id-1", "4")
    assert p.prompt == [{"role": "system", "content": "Think first."},
                        {"role": "user", "content": "2+2? Put the final answer in \\boxed{}."}]


def test_mawps_as_shipped_one_json_list():
    path = SHARED / "mawps" / "MultiArith.json"
    if not path.exists():
        pytest.skip("../shared/data/mawps is absent")
    problems = load_problems(path)
    shipped = json.loads(path.read_text())
    assert len(problems) == len(shipped) == 600
    assert all(float(p.reference) == row["lSolutions"][0] for p, row in zip(problems, shipped))
    assert problems[0].prompt == shipped[0]["sQuestion"] and problems[0].verifier == "math"


@pytest.mark.parametrize("row, field", [({"question": "x?", "answer": "no final line"}, "'answer'"),
                                        ({"problem": "x?", "solution": "no box"}, "'solution'")])
def test_bad_public_rows_name_file_row_and_field(tmp_path, row, field):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"question": "ok?", "answer": "#### 1"} if "question" in row
                               else {"problem": "ok?", "solution": "\\boxed{1}"}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError, match=rf"{path}:2: field {field}"):
        load_problems(path)


def test_unknown_layout_names_the_columns_and_the_map(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"text": "x", "label": 1}) + "\n")
    with pytest.raises(DataError, match=r"missing field 'prompt', and the columns \['label', 'text'\].*data.columns"):
        load_problems(path)


def test_hub_id_offline_fails_at_once_naming_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    import huggingface_hub.constants as c
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(c, "HF_HOME", str(tmp_path / "hf"))
    start = time.monotonic()
    with pytest.raises(UserError, match=r"data.train_path: 'openai/gsm8k' .*HF_HUB_OFFLINE.*local folder"):
        load_problems("openai/gsm8k", spec=SourceSpec(config="main"))
    assert time.monotonic() - start < 2


def test_mistyped_model_path_fails_at_once_naming_the_local_path(tmp_path, monkeypatch):
    from rlvr.models.resolve import resolve_model_path

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    import huggingface_hub.constants as c
    import rlvr.data.hub as hub
    monkeypatch.setattr(hub, "cached", lambda repo, kind: False)
    monkeypatch.setattr(c, "ENDPOINT", "http://127.0.0.1:9")   # a hub that refuses connections
    start = time.monotonic()
    with pytest.raises(UserError, match=rf"model.path: 'runs/no-such-model' .*{tmp_path}/runs/no-such-model"):
        resolve_model_path("runs/no-such-model")
    assert time.monotonic() - start < 5   # one TCP connect attempt at most, no retries
    assert os.environ.get("HF_HUB_OFFLINE") is None


def test_extractors():
    assert gsm8k_answer("48/2 = <<48/2=24>>24\n#### 1,234,567") == "1234567"
    assert gsm8k_answer("#### -3.5") == "-3.5"
    assert last_boxed("\\boxed{a} then \\fbox{\\sqrt{x^{2}}}") == "\\sqrt{x^{2}}"
    with pytest.raises(ValueError):
        last_boxed("\\boxed{open")
