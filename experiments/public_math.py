"""SmolLM2-135M-Instruct trained with GRPO on human-written word problems (GSM8K train, MultiArith,
AddSub, SingleEq as their authors ship them), evaluated before and after on held-out splits of
each set (issue 47, part 1).

    python -m experiments.public_math [data=../shared/data] [steps=36] [seed=0] [heldout=100] [max_new=0]
                                      [gsm8k_weight=0.1] [if_weight=0]

Splits are made here, by problem: each set's held-out problems are drawn by seed, and a problem
whose question (lower-cased, spaces collapsed) is held out in any set is removed from every
training set (AddSub and SingleEq share problems). The training files keep the shipped formats
(GSM8K JSON lines, MAWPS JSON lists) and go through `data.mix` with the pass-rate curriculum; the
held-out files are prompt/reference rows with the same instruction the mix's template appends.
GSM8K draws at `gsm8k_weight` of the MAWPS sets' rate: its multi-step problems are out of a 135M model's
reach (a group with no right answer teaches nothing), the MAWPS ones are within it.
Narrow gains: every run is also scored on 150 IFEval-style instructions (15 constraint types x the 10
topics of `experiments.verifiers_on_smollm2`, greedy, 160 tokens, rlvr's `constraints` verifier), and
`if_weight=W` adds to the mixture 300 constraint prompts on 20 other topics (held out by topic) at
weight W against 1 for each MAWPS set: math-only against a mixture that keeps a share of constraints.
Evaluation: `rlvr eval` per set, after training and then before it (the untrained model's evaluations
are shared: runs started together split them), reading as many tokens as training sampled (at least
96): greedy and one sample at T=0.7; on MultiArith also greedy accuracy against a thinking-token
budget (budget forcing at a sixth, a third, a half and two thirds of that cap, then `\\boxed{`).
Writes runs/experiments/public_math_RUN/{verdict.md,result.json,curves.png} (the split, the
runs and the evals under runs/experiments/public_math/); needs
`make real-model`. The package never reads ../shared: the path is this command's argument.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

from experiments.common import ROOT, plot_panels, say, write_atomic, write_verdict
from experiments.verifiers_on_smollm2 import CASES, TOPICS, request

INSTRUCTION = " Put the final answer in \\boxed{}."
SETS = {"gsm8k": "gsm8k/train.jsonl", "multiarith": "mawps/MultiArith.json",
        "addsub": "mawps/AddSub.json", "singleeq": "mawps/SingleEq.json"}
TRAIN_TOPICS = ["a mountain hike", "your best friend", "the city at night", "a birthday party",
                "autumn leaves", "a visit to the library", "a thunderstorm", "your first job",
                "a garden in spring", "the train home", "a football match", "a snowy village",
                "cooking dinner", "a museum", "the desert", "an old photograph", "a summer festival",
                "a quiet forest", "a science fair", "the river"]
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
            write_atomic(path, "".join(json.dumps(r) + "\n" for r in train))
        else:
            write_atomic(path, json.dumps(train))
        write_atomic(out / "data" / f"held_{name}.jsonl", "".join(
            json.dumps({"id": f"{name}-{i}", "prompt": _question(rows[name][i]).strip() + INSTRUCTION,
                        "reference": _reference(rows[name][i]), "verifier": "math"}) + "\n"
            for i in sorted(h)))
        sizes[name] = {"train": len(train), "heldout": len(h)}
    write_atomic(out / "data" / "constraints.jsonl", constraint_rows(TRAIN_TOPICS, "t"))
    write_atomic(out / "data" / "held_constraints.jsonl", constraint_rows(TOPICS, "c"))
    return sizes


def constraint_rows(topics: list[str], prefix: str) -> str:
    """JSONL of one chat prompt per (constraint case, topic), scored by the `constraints` verifier."""
    rows = ({"id": f"{prefix}{i}-{j}", "verifier": "constraints", "constraints": [rule],
             "prompt": [{"role": "user", "content": request(topic, text)}]}
            for i, (text, rule, *_) in enumerate(CASES) for j, topic in enumerate(topics))
    return "".join(json.dumps(r) + "\n" for r in rows)


def config(out: Path, steps: int, seed: int, name: str, max_new: int, gsm8k_weight: float,
           if_weight: float) -> Path:
    cfg = yaml.safe_load(PRESET.read_text())
    cfg["seed"] = seed
    cfg["run"]["dir"] = str(out / name)
    if max_new:
        cfg["rollout"]["max_new_tokens"] = max_new
    cfg["data"] = {"task": "", "prompt_template": "{prompt}" + INSTRUCTION, "verifier": "math",
                   "eval_path": str(out / "data" / "held_multiarith.jsonl"), "heldout_size": 100,
                   "mix": [{"path": str(out / "data" / f"{n}{Path(rel).suffix}"), "name": n,
                            "weight": gsm8k_weight if n == "gsm8k" else 1.0}
                           for n, rel in SETS.items()]}
    if if_weight:
        cfg["data"]["mix"].append({"path": str(out / "data" / "constraints.jsonl"), "name": "constraints",
                                   "weight": if_weight, "verifier": "constraints", "prompt_template": ""})
    cfg["curriculum"] = {"enabled": True}
    cfg["grpo"]["steps"] = steps
    path = out / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _run_unclaimed(dest: Path, cmd: list[str]) -> bool:
    """Whether `dest` has its eval.json: already, or now, computed by this run when no live process
    has claimed it (a dead claimant's claim is taken over on the next call)."""
    dest.mkdir(parents=True, exist_ok=True)
    claim, result = dest / "claim", dest / "eval.json"
    if result.exists():
        return True
    try:
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            os.kill(int(claim.read_text() or 0), 0)
        except (ProcessLookupError, ValueError):
            claim.unlink(missing_ok=True)
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    try:
        subprocess.run([*cmd, "--out", str(dest)], check=True)
    finally:
        claim.unlink(missing_ok=True)
    return True


def _eval_all(jobs: dict[str, tuple[Path, list[str]]]) -> dict[str, dict]:
    """Every job's eval.json. Runs started together share the untrained model's evaluations: each
    takes the ones nobody has claimed, then waits for the others' results."""
    pending = dict(jobs)
    while pending:
        pending = {name: job for name, job in pending.items() if not _run_unclaimed(*job)}
        if pending:
            time.sleep(5)
    return {name: json.loads((dest / "eval.json").read_text()) for name, (dest, _) in jobs.items()}


def evaluate(model: str, out: Path, tag: str, cap: int) -> dict[str, dict]:
    """`rlvr eval` of `model` on each held-out set, greedy and one sample at T = 0.7 (MultiArith, the
    multi-step set, also under budget forcing), and greedily on the constraint prompts."""
    budgets = ",".join(str(cap * f // 6) for f in (1, 2, 3, 4))
    jobs = {name: (out / f"eval_{tag}_{name}", [
        *RLVR, "eval", model, "--data", str(out / "data" / f"held_{name}.jsonl"), "--k", "1",
        "--samples", "1", "--temperature", "0.7", "--temperatures", "",
        "--budgets", budgets if name == "multiarith" else "", "--answer-marker", "\\n\\boxed{",
        "--max-new-tokens", str(cap), "--chat-template-text"]) for name in SETS}
    jobs["constraints"] = (out / f"eval_{tag}_constraints", [
        *RLVR, "eval", model, "--data", str(out / "data" / "held_constraints.jsonl"), "--k", "1",
        "--samples", "1", "--temperature", "0.7", "--temperatures", "", "--budgets", "",
        "--max-new-tokens", "160"])
    return _eval_all(jobs)


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


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    data = Path(args.get("data", "../shared/data"))
    steps, seed, heldout = int(args.get("steps", 36)), int(args.get("seed", 0)), int(args.get("heldout", 100))
    max_new = int(args.get("max_new", 0))     # rollout.max_new_tokens (0: the preset's 64)
    gsm8k_weight = float(args.get("gsm8k_weight", 0.1))
    cap = max(96, max_new)                     # the evaluations read what training sampled, at least 96
    if_weight = float(args.get("if_weight", 0))
    name = f"run_s{seed}" + (f"_t{max_new}" if max_new else "") + f"_g{gsm8k_weight:g}"
    name += f"_if{if_weight:g}" if if_weight else ""
    out = ROOT / "public_math"                 # one split (seed 0) for every training seed
    sizes = split(data, out, heldout, 0)
    say(f"splits: {sizes}")
    if (out / name / "final").exists():        # trained by an earlier call: evaluate and report only
        say(f"{out / name} is trained; reading it")
        train_s = json.loads((out / name / "summary.json").read_text())["wall_seconds"]
    else:
        t0 = time.perf_counter()
        cfg = config(out, steps, seed, name, max_new, gsm8k_weight, if_weight)
        subprocess.run([*RLVR, "train", str(cfg)], check=True)
        train_s = time.perf_counter() - t0
    after = evaluate(str(out / name / "final"), out, f"after_{name[4:]}", cap)
    before = evaluate("builtin:smollm2", out, f"before_t{cap}", cap)
    metrics = [json.loads(line) for line in (out / name / "metrics.jsonl").read_text().splitlines()]
    steps_rows = [m for m in metrics if "reward/mean" in m]
    b, a = {n: _pick(before[n]) for n in SETS}, {n: _pick(after[n]) for n in SETS}
    lines = [f"# public_math seed {seed}, {steps} steps, max_new_tokens {max_new or 'preset'}, "
             f"GSM8K weight {gsm8k_weight:g}, constraint weight {if_weight:g}, evaluated at {cap} tokens", "",
             f"splits: {json.dumps(sizes)}",
             f"training wall {train_s:.0f} s (rlvr train, including its start and final eval)", "",
             "| set | metric | before | after |", "| --- | --- | --- | --- |"]
    for n in SETS:
        for k in ("greedy_accuracy", "greedy_mean_length", "pass@1"):
            lines.append(f"| {n} | {k} | {b[n][k]:.3f} | {a[n][k]:.3f} |")
    mean = {t: sum(x[n]["greedy_accuracy"] for n in SETS) / len(SETS)
            for t, x in (("before", b), ("after", a))}
    ifb, ifa = (x["constraints"]["greedy_accuracy"] for x in (before, after))
    lines += ["", f"mean greedy over the four held-out sets: {mean['before']:.3f} -> {mean['after']:.3f}",
              f"instruction following (150 held-out constraint prompts, greedy): {ifb:.3f} -> {ifa:.3f}", "",
              "| set | budget | before | after |", "| --- | --- | --- | --- |"]
    for rb, ra in zip(before["multiarith"]["budget_curve"], after["multiarith"]["budget_curve"]):
        lines.append(f"| multiarith | {rb['budget']} | {rb['accuracy']:.3f} | {ra['accuracy']:.3f} |")
    curves = {t: ev["multiarith"]["budget_curve"] for t, ev in (("before", before), ("after", after))}
    write_verdict(f"public_math_{name[4:]}", {"sizes": sizes, "train_seconds": round(train_s, 1), "before": b,
                                           "after": a, "budget_curves": curves, "steps": steps_rows,
                                           "constraints": {"before": ifb, "after": ifa}}, lines,
                  lambda p: plot_panels(p, [
                      ("reward/mean", {"train": [(m["step"], m["reward/mean"]) for m in steps_rows]}),
                      ("completion length", {"train": [(m["step"], m.get("completions/mean_length", 0.0))
                                                       for m in steps_rows]}),
                      ("MultiArith held-out greedy vs thinking budget", {
                          t: [(r["budget"], r["accuracy"]) for r in rows] for t, rows in curves.items()})]))


if __name__ == "__main__":
    main(sys.argv[1:])
