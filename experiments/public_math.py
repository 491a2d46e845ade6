"""SmolLM2-135M-Instruct trained with GRPO on human-written word problems (GSM8K train, MultiArith,
AddSub, SingleEq as their authors ship them), evaluated before and after on held-out splits of
each set (issue 47, part 1).

    python -m experiments.public_math [data=../shared/data] [steps=36] [seed=0] [heldout=100] [max_new=0]
                                      [gsm8k_weight=0.1] [if_weight=0] [cold_start=0] [threads=0] [k=1]

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
`cold_start=N` first runs N steps of `rlvr sft` (8 rows a step, lr 5e-5, bf16 where native) on
worked solutions of the training problems only: each MAWPS problem's shipped equation written out
one operation a line (`32 + 42 = 74.` / `74 - 35 = 39.`; an unknown that is not alone is isolated
first: `35 + x = 56, so x = 56 - 35.`), a value that disagrees with the shipped solution dropped,
plus 300 GSM8K training problems of at most three steps with their shipped solution (calculator
marks removed); every one ends `The answer is \\boxed{V}.` GRPO then starts from that checkpoint,
which is evaluated too: the seeds' cold start, for a model whose groups are almost never right.
Evaluation: `rlvr eval` per set, after training and then before it (the untrained model's evaluations
are shared: runs started together split them), reading as many tokens as training sampled (at least
96): greedy and one sample at T=0.7; on MultiArith also greedy accuracy against a thinking-token
budget (budget forcing at a sixth, a third, a half and two thirds of that cap, then `\\boxed{`),
and with `k=K` K samples a problem for pass@K and maj@K. `threads=N` gives every child N torch
threads (default: rlvr's, one on 2 cores, so two runs can share them).
Writes runs/experiments/public_math_RUN/{verdict.md,result.json,curves.png} (the split, the
runs and the evals under runs/experiments/public_math/); needs
`make real-model`. The package never reads ../shared: the path is this command's argument.
"""

from __future__ import annotations

import ast
import json
import operator
import os
import random
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import yaml

from rlvr.monitor.log import read_metrics

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


OPS = {ast.Add: ("+", operator.add), ast.Sub: ("-", operator.sub), ast.Mult: ("*", operator.mul),
       ast.Div: ("/", operator.truediv)}


def _num(v: float) -> str:
    return str(int(round(v))) if abs(v - round(v)) < 1e-9 else f"{v:.4f}".rstrip("0").rstrip(".")


def _steps(node: ast.AST, lines: list[str]) -> float:
    """The value of an arithmetic expression; each operation appended to `lines` as it is done."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        a, b = _steps(node.left, lines), _steps(node.right, lines)
        sym, fn = OPS[type(node.op)]
        v = fn(a, b)
        lines.append(f"{_num(a)} {sym} {_num(b)} = {_num(v)}.")
        return v
    raise ValueError(f"not arithmetic: {ast.dump(node)}")


INVERSE = {(ast.Add, 0): (ast.Sub, False), (ast.Add, 1): (ast.Sub, False),
           (ast.Mult, 0): (ast.Div, False), (ast.Mult, 1): (ast.Div, False),
           (ast.Sub, 0): (ast.Add, False), (ast.Sub, 1): (ast.Sub, True),
           (ast.Div, 0): (ast.Mult, False), (ast.Div, 1): (ast.Div, True)}


def _text(node: ast.AST) -> str:
    if _is_x(node):
        return "x"
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return _num(float(node.value))
    if not (isinstance(node, ast.BinOp) and type(node.op) in OPS):
        raise ValueError(f"not arithmetic: {ast.dump(node)}")
    parts = [_text(n) if isinstance(n, (ast.Name, ast.Constant)) else f"({_text(n)})"
             for n in (node.left, node.right)]
    return f"{parts[0]} {OPS[type(node.op)][0]} {parts[1]}"


def _is_x(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "x"


def _has_x(node: ast.AST) -> bool:
    return any(_is_x(n) for n in ast.walk(node))


def worked(equation: str) -> tuple[list[str], float]:
    """Solution lines and value of one MAWPS equation ('X=((32.0+42.0)-35.0)', '70-x=27'): an
    unknown that is not alone is isolated first ('35 + x = 56, so x = 56 - 35.'), then each
    operation is done on its own line."""
    left, right = (ast.parse(side, mode="eval").body for side in equation.replace(" ", "").lower().split("="))
    if _has_x(right):
        left, right = right, left
    if _has_x(right) or not _has_x(left):
        raise ValueError(f"one side must hold the unknown: {equation!r}")
    lines = [] if _is_x(left) else [f"{_text(left)} = {_text(right)}, so"]
    while not _is_x(left):
        if not isinstance(left, ast.BinOp) or type(left.op) not in OPS:
            raise ValueError(f"not arithmetic: {equation!r}")
        side = 0 if _has_x(left.left) else 1
        known = left.right if side == 0 else left.left
        op, flipped = INVERSE[(type(left.op), side)]
        right = ast.BinOp(known, op(), right) if flipped else ast.BinOp(right, op(), known)
        left = left.left if side == 0 else left.right
    if lines:
        lines[0] += f" x = {_text(right)}."
    value = _steps(right, lines)
    return lines, value


def sft_rows(out: Path, gsm8k: int = 300, seed: int = 0) -> dict[str, int]:
    """out/data/sft.jsonl: worked solutions of the training files' problems (never a held-out one)."""
    rows, kept = [], {"dropped": 0}
    for name, rel in SETS.items():
        train = _rows(out / "data" / f"{name}{Path(rel).suffix}")
        if name == "gsm8k":
            short = [r for r in train if r["answer"].count("\n") <= 3]
            for r in random.Random(seed).sample(short, min(gsm8k, len(short))):
                body, final = re.sub(r"<<[^>]*>>", "", r["answer"]).rsplit("####", 1)
                rows.append((r["question"], body.strip().split("\n"), final.strip().replace(",", "")))
            kept[name] = min(gsm8k, len(short))
            continue
        kept[name] = 0
        for r in train:
            try:
                lines, value = worked(r["lEquations"][0])
            except (ValueError, SyntaxError, ZeroDivisionError, TypeError):
                kept["dropped"] += 1
                continue
            ref = float(r["lSolutions"][0])
            if abs(value - ref) > 1e-6 * max(1.0, abs(ref)):
                kept["dropped"] += 1
                continue
            rows.append((r["sQuestion"], lines, _num(value)))
            kept[name] += 1
    write_atomic(out / "data" / "sft.jsonl", "".join(json.dumps({
        "prompt": [{"role": "user", "content": q.strip() + INSTRUCTION}],
        "completion": "\n".join([*lines, f"The answer is \\boxed{{{v}}}."])}) + "\n" for q, lines, v in rows))
    return kept


def cold_start(out: Path, steps: int, seed: int, threads: int = 0) -> tuple[Path, float]:
    """`rlvr sft` of the preset's model on out/data/sft.jsonl; the checkpoint and its wall seconds."""
    dest = out / (f"sft_s{seed}_cs{steps}" + (f"_th{threads}" if threads else ""))
    if (dest / "sft_summary.json").exists():
        return dest, json.loads((dest / "sft_summary.json").read_text()).get("wall_seconds", 0.0)
    t0 = time.perf_counter()
    subprocess.run([*RLVR, "sft", "--model", yaml.safe_load(PRESET.read_text())["model"]["path"],
                    "--data", str(out / "data" / "sft.jsonl"), "--out", str(dest), "--steps", str(steps),
                    "--batch-size", "8", "--lr", "5e-5", "--warmup-steps", "10", "--seed", str(seed),
                    "--bf16-where-native", "--threads", str(threads)],
                   check=True)
    wall = time.perf_counter() - t0
    summary = json.loads((dest / "sft_summary.json").read_text())
    write_atomic(dest / "sft_summary.json", json.dumps({**summary, "wall_seconds": round(wall, 1)}))
    return dest, wall


def constraint_rows(topics: list[str], prefix: str) -> str:
    """JSONL of one chat prompt per (constraint case, topic), scored by the `constraints` verifier."""
    rows = ({"id": f"{prefix}{i}-{j}", "verifier": "constraints", "constraints": [rule],
             "prompt": [{"role": "user", "content": request(topic, text)}]}
            for i, (text, rule, *_) in enumerate(CASES) for j, topic in enumerate(topics))
    return "".join(json.dumps(r) + "\n" for r in rows)


def config(out: Path, steps: int, seed: int, name: str, max_new: int, gsm8k_weight: float,
           if_weight: float, model: str = "", threads: int = 0) -> Path:
    cfg = yaml.safe_load(PRESET.read_text())
    cfg["seed"] = seed
    cfg["run"]["threads"] = threads
    if model:
        cfg["model"]["path"] = model
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


def evaluate(model: str, out: Path, tag: str, cap: int, threads: int = 0, k: int = 1) -> dict[str, dict]:
    """`rlvr eval` of `model` on each held-out set, greedy and one sample at T = 0.7 (MultiArith, the
    multi-step set, also under budget forcing and with `k` samples for pass@k / maj@k), and greedily
    on the constraint prompts."""
    budgets = ",".join(str(cap * f // 6) for f in (1, 2, 3, 4))
    ks = {name: f"1,{k}" if k > 1 and name == "multiarith" else "1" for name in SETS}
    tag += f"_k{k}" if k > 1 else ""
    jobs = {name: (out / f"eval_{tag}_{name}", [
        *RLVR, "eval", model, "--data", str(out / "data" / f"held_{name}.jsonl"), "--k", ks[name],
        "--samples", ks[name].split(",")[-1], "--temperature", "0.7", "--temperatures", "",
        "--threads", str(threads),
        "--budgets", budgets if name == "multiarith" else "", "--answer-marker", "\\n\\boxed{",
        "--max-new-tokens", str(cap), "--chat-template-text"]) for name in SETS}
    jobs["constraints"] = (out / f"eval_{tag}_constraints", [
        *RLVR, "eval", model, "--data", str(out / "data" / "held_constraints.jsonl"), "--k", "1",
        "--samples", "1", "--temperature", "0.7", "--temperatures", "", "--budgets", "",
        "--threads", str(threads), "--max-new-tokens", "160"])
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
    cs_steps = int(args.get("cold_start", 0))  # rlvr sft steps on worked training solutions first
    threads = int(args.get("threads", 0))      # torch threads of each child (0: rlvr's, 1 on 2 cores)
    k = int(args.get("k", 1))                  # MultiArith samples for pass@k / maj@k (1: one sample)
    name = f"run_s{seed}" + (f"_t{max_new}" if max_new else "") + f"_g{gsm8k_weight:g}"
    name += (f"_if{if_weight:g}" if if_weight else "") + (f"_cs{cs_steps}" if cs_steps else "")
    name += f"_th{threads}" if threads else ""
    out = ROOT / "public_math"                 # one split (seed 0) for every training seed
    sizes = split(data, out, heldout, 0)
    say(f"splits: {sizes}")
    start, sft_s, sft_eval = "", 0.0, None
    if cs_steps:
        say(f"cold-start rows: {sft_rows(out)}")
        sft_dir, sft_s = cold_start(out, cs_steps, seed, threads)
        start = str(sft_dir)
    if (out / name / "final").exists():        # trained by an earlier call: evaluate and report only
        say(f"{out / name} is trained; reading it")
        train_s = json.loads((out / name / "summary.json").read_text())["wall_seconds"]
    else:
        t0 = time.perf_counter()
        cfg = config(out, steps, seed, name, max_new, gsm8k_weight, if_weight, start, threads)
        subprocess.run([*RLVR, "train", str(cfg)], check=True)
        train_s = time.perf_counter() - t0
    after = evaluate(str(out / name / "final"), out, f"after_{name[4:]}", cap, threads, k)
    if start:
        sft_eval = evaluate(start, out, f"{Path(start).name}_t{cap}", cap, threads, k)
    before = evaluate("builtin:smollm2", out, f"before_t{cap}", cap, threads, k)
    steps_rows = [m for m in read_metrics(out / name) if "reward/mean" in m]
    stages = {"before": before, **({"after SFT": sft_eval} if sft_eval else {}), "after": after}
    picked = {t: {n: _pick(ev[n]) for n in SETS} for t, ev in stages.items()}
    # the largest child waited for so far: rlvr sft, train or eval (kB on Linux)
    peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6
    head = " | ".join(stages)
    lines = [f"# public_math seed {seed}, {steps} steps, max_new_tokens {max_new or 'preset'}, "
             f"GSM8K weight {gsm8k_weight:g}, constraint weight {if_weight:g}, cold start {cs_steps} "
             f"SFT steps, evaluated at {cap} tokens", "",
             f"splits: {json.dumps(sizes)}",
             f"cold start wall {sft_s:.0f} s (rlvr sft)" if cs_steps else "no cold start",
             f"training wall {train_s:.0f} s (rlvr train, including its start and final eval)",
             f"peak RSS of the largest child process {peak_gb:.1f} GB", "",
             f"| set | metric | {head} |", "| --- | --- |" + " --- |" * len(stages)]
    for n in SETS:
        for key in ("greedy_accuracy", "greedy_mean_length", "pass@1"):
            lines.append(f"| {n} | {key} | " + " | ".join(f"{picked[t][n][key]:.3f}" for t in stages) + " |")
    mean = {t: sum(x[n]["greedy_accuracy"] for n in SETS) / len(SETS) for t, x in picked.items()}
    ifs = {t: ev["constraints"]["greedy_accuracy"] for t, ev in stages.items()}
    if k > 1:
        for key in (f"pass@{k}", f"maj@{k}"):
            lines.append(f"| multiarith | {key} | " + " | ".join(
                f"{picked[t]['multiarith'][key]:.3f}" for t in stages) + " |")
    lines += ["", "mean greedy over the four held-out sets: " + " -> ".join(f"{mean[t]:.3f}" for t in stages),
              "instruction following (150 held-out constraint prompts, greedy): "
              + " -> ".join(f"{ifs[t]:.3f}" for t in stages), "",
              f"| set | budget | {head} |", "| --- | --- |" + " --- |" * len(stages)]
    curves = {t: ev["multiarith"]["budget_curve"] for t, ev in stages.items()}
    for i, row in enumerate(curves["before"]):
        lines.append(f"| multiarith | {row['budget']} | "
                     + " | ".join(f"{curves[t][i]['accuracy']:.3f}" for t in stages) + " |")
    write_verdict(f"public_math_{name[4:]}", {
        "sizes": sizes, "cold_start_seconds": round(sft_s, 1), "train_seconds": round(train_s, 1),
        "peak_rss_gb": round(peak_gb, 2), "threads": threads, "k": k,
        **{t.replace(" ", "_"): picked[t] for t in stages},
        "budget_curves": curves, "steps": steps_rows, "constraints": ifs}, lines,
                  lambda p: plot_panels(p, [
                      ("reward/mean", {"train": [(m["step"], m["reward/mean"]) for m in steps_rows]}),
                      ("completion length", {"train": [(m["step"], m.get("completions/mean_length", 0.0))
                                                       for m in steps_rows]}),
                      ("MultiArith held-out greedy vs thinking budget", {
                          t: [(r["budget"], r["accuracy"]) for r in rows] for t, rows in curves.items()})]))


if __name__ == "__main__":
    main(sys.argv[1:])
