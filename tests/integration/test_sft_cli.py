"""`rlvr sft` from JSONL pairs and by distillation from a teacher's verified samples."""

from __future__ import annotations

import json

from rlvr.cli.main import main


def test_sft_from_jsonl_pairs(tmp_path):
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i}+1=", "completion": f">{i + 1}"}) + "\n"
                            for i in range(10)))
    out = tmp_path / "student"
    assert main(["sft", "--data", str(data), "--out", str(out), "--steps", "3", "--batch-size", "4",
                 "--threads", "1"]) == 0
    assert (out / "model.safetensors").exists()
    assert json.loads((out / "sft_summary.json").read_text())["steps"] == 3


def test_distillation_keeps_only_verified_teacher_samples(tmp_path, capsys, cold_start_model):
    out = tmp_path / "student"
    assert main(["sft", "--teacher", str(cold_start_model), "--out", str(out), "--num-problems", "16",
                 "--k", "4", "--steps", "2", "--batch-size", "4", "--threads", "1"]) == 0
    text = capsys.readouterr().out
    kept = int(text.split("kept ")[1].split(" of")[0])
    assert 0 < kept < 64
    assert (out / "model.safetensors").exists()


def test_sft_rejects_bad_flags(tmp_path, capsys):
    assert main(["sft", "--out", str(tmp_path / "x"), "--steps", "0"]) == 2
    assert "--steps" in capsys.readouterr().err
    assert main(["sft", "--out", str(tmp_path / "x"), "--data", str(tmp_path / "none.jsonl")]) == 2
