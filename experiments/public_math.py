"""SmolLM2-135M-Instruct trained with GRPO on human-written word problems (GSM8K train, MultiArith,
AddSub, SingleEq as their authors ship them), evaluated before and after on held-out splits of
each set (issue 47, part 1).

    python -m experiments.public_math [data=../shared/data] [steps=36] [seed=0] [heldout=100] [max_new=0]

Splits are made here, by problem: each set's held-out problems are drawn by seed, and a problem
whose question (lower-cased, spaces collapsed) is held out in any set is removed from every
training set (AddSub and SingleEq share problems). The training files keep the shipped formats
(GSM8K JSON lines, MAWPS JSON lists) and go through `data.mix` with the pass-rate curriculum; the
held-out files are prompt/reference rows with the same instruction the mix's template appends.
Evaluation: `rlvr eval` greedy and 4 samples at T=0.7 (pass@4, maj@4) per set, before and after.
Writes runs/experiments/public_math_sSEED/{verdict.md,result.json,curves.png} (the split, the
runs and the evals under runs/experiments/public_math/); needs
`make real-model`. The package never reads ../shared: the path is this command's argument.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

from experiments.common import ROOT, plot_panels, say, write_verdict

INSTRUCTION = " Put the final answer in \\boxed{}."
SETS = {"gsm8k": "gsm8k/train.jsonl", "multiarith": "mawps/MultiArith.json",
        "addsub": "mawps/AddSub.json", "singleeq": "mawps/SingleEq.json"}
PRESET = Path(__file__).parent.parent / "src" / "rlvr" / "configs" / "smollm2.yaml"
RLVR = [sys.executable, "-m", "rlvr.cli"]


def _key(question: str) -> str:
    return re.sub(r"\s+", " ", question.strip().lower())


def _rows(path: Path) -> list[dict]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return json.loads(path.read_text())


def _question(row: dict) -> str:
    return row.get("question") or row["sQuestion"]


def _reference(row: dict) -> str:
    if "answer" in row:
        return row["answer"].rsplit("####", 1)[1].strip().replace(",", "")
    value = float(row["lSolutions"][0])
    return str(int(value)) if value == int(value) else str(value)


def split(data: Path, out: Path, heldout: int, seed: int) -> dict[str, dict[str, int]]:
    """Training files (shipped format) and held-out files (prompt/reference) under out/data."""
    rows = {name: _rows(data / rel) for name, rel in SETS.items()}
    rng = random.Random(seed)
    held = {name: rng.sample(range(len(r)), min(heldout, len(r) // 4)) for name, r in rows.items()}
    held_keys = {_key(_question(rows[n][i])) for n, idx in held.items() for i in idx}
    (out / "data").mkdir(parents=True, exist_ok=True)
    sizes = {}
    for name, rel in SETS.items():
        h = set(held[name])
        train = [r for i, r in enumerate(rows[name]) if i not in h and _key(_question(r)) not in held_keys]
        path = out / "data" / f"{name}{Path(rel).suffix}"
        if path.suffix == ".jsonl":
            path.write_text("".join(json.dumps(r) + "\n" for r in train))
        else:
            path.write_text(json.dumps(train))
        (out / "data" / f"held_{name}.jsonl").write_text("".join(
            json.dumps({"id": f"{name}-{i}", "prompt": _question(rows[name][i]).strip() + INSTRUCTION,
                        "reference": _reference(rows[name][i]), "verifier": "math"}) + "\n"
            for i in sorted(h)))
        sizes[name] = {"train": len(train), "heldout": len(h)}
    return sizes


def config(out: Path, steps: int, seed: int, name: str, max_new: int) -> Path:
    cfg = yaml.safe_load(PRESET.read_text())
    cfg["seed"] = seed
    cfg["run"]["dir"] = str(out / name)
    if max_new:
        cfg["rollout"]["max_new_tokens"] = max_new
    cfg["data"] = {"task": "", "prompt_template": "{prompt}" + INSTRUCTION, "verifier": "math",
                   "eval_path": str(out / "data" / "held_multiarith.jsonl"), "heldout_size": 100,
                   "mix": [{"path": str(out / "data" / f"{n}{Path(rel).suffix}"), "name": n}
                           for n, rel in SETS.items()]}
    cfg["curriculum"] = {"enabled": True}
    cfg["grpo"]["steps"] = steps
    path = out / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def evaluate(model: str, out: Path, tag: str) -> dict[str, dict]:
    scores = {}
    for name in SETS:
        dest = out / f"eval_{tag}_{name}"
        subprocess.run([*RLVR, "eval", model, "--data", str(out / "data" / f"held_{name}.jsonl"),
                        "--k", "1,4", "--samples", "4", "--temperature", "0.7", "--temperatures", "",
                        "--budgets", "", "--max-new-tokens", "96", "--chat-template-text", "--out", str(dest)],
                       check=True)
        scores[name] = json.loads((dest / "eval.json").read_text())
    return scores


def _pick(ev: dict) -> dict[str, float]:
    """Greedy accuracy, pass@4, maj@4 and greedy mean length from an eval.json."""
    flat: dict[str, float] = {}

    def walk(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}/")
            elif isinstance(v, (int, float)):
                flat[f"{prefix}{k}"] = v
    walk(ev)
    return flat


def _cached_eval(model: str, out: Path, tag: str) -> dict[str, dict]:
    """`evaluate`, or the eval.json files an earlier call left (the before-evals are shared by seeds)."""
    if all((out / f"eval_{tag}_{n}" / "eval.json").exists() for n in SETS):
        return {n: json.loads((out / f"eval_{tag}_{n}" / "eval.json").read_text()) for n in SETS}
    return evaluate(model, out, tag)


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    data = Path(args.get("data", "../shared/data"))
    steps, seed, heldout = int(args.get("steps", 36)), int(args.get("seed", 0)), int(args.get("heldout", 100))
    stage = args.get("stage", "all")          # before: the split and the untrained model's evals only
    max_new = int(args.get("max_new", 0))     # rollout.max_new_tokens (0: the preset's 64)
    name = f"run_s{seed}" + (f"_t{max_new}" if max_new else "")
    out = ROOT / "public_math"                 # one split (seed 0) for every training seed
    sizes = split(data, out, heldout, 0)
    say(f"splits: {sizes}")
    before = _cached_eval("builtin:smollm2", out, "before")
    if stage == "before":
        return
    t0 = time.perf_counter()
    subprocess.run([*RLVR, "train", str(config(out, steps, seed, name, max_new))], check=True)
    train_s = time.perf_counter() - t0
    after = _cached_eval(str(out / name / "final"), out, f"after_{name[4:]}")
    metrics = [json.loads(line) for line in (out / name / "metrics.jsonl").read_text().splitlines()]
    steps_rows = [m for m in metrics if "reward/mean" in m]
    b, a = {n: _pick(before[n]) for n in SETS}, {n: _pick(after[n]) for n in SETS}
    lines = [f"# public_math seed {seed}, {steps} steps, max_new_tokens {max_new or 'preset'}", "",
             f"splits: {json.dumps(sizes)}",
             f"training wall {train_s:.0f} s (rlvr train, including its start and final eval)", "",
             "| set | metric | before | after |", "| --- | --- | --- | --- |"]
    for n in SETS:
        for k in ("greedy_accuracy", "pass@1", "pass@4", "maj@4"):
            lines.append(f"| {n} | {k} | {b[n][k]:.3f} | {a[n][k]:.3f} |")
    write_verdict(f"public_math_{name[4:]}", {"sizes": sizes, "train_seconds": round(train_s, 1), "before": b,
                                           "after": a, "steps": steps_rows}, lines,
                  lambda p: plot_panels(p, [
                      ("reward/mean", {"train": [(m["step"], m["reward/mean"]) for m in steps_rows]}),
                      ("completion length", {"train": [(m["step"], m.get("completions/mean_length", 0.0))
                                                       for m in steps_rows]})]))


if __name__ == "__main__":
    main(sys.argv[1:])
