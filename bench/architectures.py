"""The architecture table of docs/results/architectures.md: for each family in `rlvr.testing.zoo`
(tiny, random init, built locally), which decode path the engine takes, the largest |Δ log-prob|
of sampled tokens against a plain Hugging Face forward (the engine's sampling log-probs, and the
update's padded recomputation), and how many GRPO steps ran with an optimizer update. The baseline
is the plain forward measured in the same run. Same functions as tests/integration/test_architectures.py.

    PYTHONPATH=src python bench/architectures.py [--steps 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
import transformers

from rlvr.testing import zoo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, float32, CPU\n")
    print("| model type | class | decode/update path | max \\|Δlogp\\| sampling | max \\|Δlogp\\| update "
          "| GRPO steps run (updated) | max weight change |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for model_type in zoo.ARCHITECTURES:
            model, tokenizer = zoo.build(model_type, seed=1)
            parity = zoo.logprob_parity(model, tokenizer)
            checkpoint = zoo.save(model_type, Path(tmp) / model_type / "init", seed=2)
            run = zoo.grpo_run(checkpoint, Path(tmp) / model_type / "grpo", steps=args.steps)
            path = "fused" if parity["engine"] == "fused" else "HF fallback"
            rows.append({"model_type": model_type, "class": type(model).__name__, "path": path,
                         **parity, **run})
            print(f"| {model_type} | {type(model).__name__} | {path} | {parity['sampling_max_abs']:.1e} "
                  f"| {parity['training_max_abs']:.1e} | {run['steps']} ({run['updated_steps']}) "
                  f"| {run['max_weight_change']:.1e} |", flush=True)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
