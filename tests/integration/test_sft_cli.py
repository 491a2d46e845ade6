"""`rlvr sft` from JSONL pairs and by distillation from a teacher's verified samples."""

from __future__ import annotations

import json

import pytest
import torch

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


@pytest.mark.parametrize("flag, native, bf16", [([], True, False), (["--bf16-where-native"], True, True),
                                                 (["--bf16-where-native"], False, False)])
def test_sft_multiplies_in_bf16_only_where_asked_and_native(tmp_path, monkeypatch, flag, native, bf16):
    from rlvr.models import device as device_mod
    from rlvr.training import sft as sft_mod

    monkeypatch.setattr(device_mod, "cpu_computes_bf16", lambda: native)
    seen = []
    real = sft_mod.sft_loss

    def recording(model, batch, pad_id, device):
        seen.append(device.bf16)
        loss = real(model, batch, pad_id, device)
        seen.append(loss.dtype)
        return loss
    monkeypatch.setattr(sft_mod, "sft_loss", recording)
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i}+1=", "completion": f">{i + 1}"}) + "\n"
                            for i in range(4)))
    assert main(["sft", "--data", str(data), "--out", str(tmp_path / "s"), "--steps", "1",
                 "--batch-size", "2", "--threads", "1", "--device", "cpu", *flag]) == 0
    assert seen == [bf16, torch.float32]   # the loss itself is float32 either way


def test_distillation_keeps_only_verified_teacher_samples(tmp_path, capsys, cold_start_model, monkeypatch):
    from rlvr.models.policy import encode_prompt
    from rlvr.training import sft as sft_mod

    seen = {}
    real = sft_mod.distill_pairs

    def recording(engine, tokenizer, problems, verifiers, k, params):
        pairs = real(engine, tokenizer, problems, verifiers, k, params)
        seen.update(tokenizer=tokenizer, problems=problems, verifiers=verifiers, pairs=pairs, params=params)
        return pairs

    monkeypatch.setattr(sft_mod, "distill_pairs", recording)
    out = tmp_path / "student"
    assert main(["sft", "--teacher", str(cold_start_model), "--out", str(out), "--num-problems", "16",
                 "--k", "4", "--steps", "2", "--batch-size", "4", "--threads", "1",
                 "--teacher-temperature", "0.7", "--teacher-max-new-tokens", "40"]) == 0
    # the knobs reach the teacher's sampling
    assert (seen["params"].temperature, seen["params"].max_new_tokens) == (0.7, 40)
    text = capsys.readouterr().out
    kept = int(text.split("kept ")[1].split(" of")[0])
    assert 0 < kept < 64 and kept == len(seen["pairs"])
    assert (out / "model.safetensors").exists()
    # Every kept sample passes the verifier of the problem it answers.
    tok = seen["tokenizer"]
    by_prompt = {tuple(encode_prompt(tok, p)): p for p in seen["problems"]}
    for prompt_ids, completion_ids in seen["pairs"]:
        problem = by_prompt[tuple(prompt_ids)]
        assert completion_ids[-1] == tok.eos_token_id
        text = tok.decode(completion_ids[:-1])
        [score] = seen["verifiers"][problem.verifier].score_batch([text], [problem])
        assert score.correct, (problem.prompt, text)


def test_sft_rejects_bad_flags(tmp_path, capsys):
    assert main(["sft", "--out", str(tmp_path / "x"), "--steps", "0"]) == 2
    assert "--steps" in capsys.readouterr().err
    assert main(["sft", "--out", str(tmp_path / "x"), "--data", str(tmp_path / "none.jsonl")]) == 2
