"""The shipped GPU presets on the CPU: `rlvr train gpu1` loads and runs a step with
`run.device=cpu` and its shapes shrunk by overrides (the tiny built-in model, GSM8K-shaped rows
written here: `question`, `answer` ending in "#### N"); `gpu8` loads with its FSDP2 and
server settings. What they do on GPUs is unverified here (bench/gpu_check.sh)."""

import json

from rlvr import config
from rlvr.cli.main import main

ROWS = [{"question": f"Tom has {a} apples and buys {b} more. How many apples does he have?",
         "answer": f"He has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} apples.\n#### {a + b}"}
        for a, b in ((3, 4), (12, 5), (7, 8), (20, 22), (9, 9), (1, 30))]

SHRINK = ["run.device=cpu", "model.path=builtin:tiny-llama-ascii", "model.chat_template_text=false",
          "data.heldout_size=2", "rollout.max_new_tokens=8", "eval.max_new_tokens=8",
          "grpo.steps=1", "grpo.group_size=2", "grpo.prompts_per_step=2", "run.eval_every=0",
          "run.save_every=0", "run.report=false", "run.progress=false", "run.threads=1"]


def test_gpu1_preset_runs_a_step_on_the_cpu_shrunk(tmp_path):
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    run_dir = tmp_path / "run"
    code = main(["train", "gpu1", f"run.dir={run_dir}", f"data.train_path={data}", *SHRINK])
    assert code == 0
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any("reward/mean" in r for r in steps)


def test_gpu_presets_keep_what_they_are_sized_for():
    one, eight = config.load("gpu1"), config.load("gpu8")
    assert one.rollout.engine == "hf" and one.grpo.micro_batch_tokens == 0
    assert one.model.path == "Qwen/Qwen2.5-0.5B-Instruct" and one.data.prompt_field == "question"
    assert eight.run.data_parallel == "fsdp2" and eight.rollout.engine == "vllm_server"
    assert eight.rollout.vllm_servers == 4 and eight.grpo.micro_batch_tokens == 0
