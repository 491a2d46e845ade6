"""Narrow gains: GRPO on arithmetic alone vs on a mix of arithmetic and digit sorting, watching
both skills. Run: `python -m experiments.narrow_gains [steps=30] [--seeds 0 1] [--arms arith_only mix]`
(one process per arm and seed can run in parallel; each rewrites the verdict over all saved so far).

The seeds' claim: RL on one task buys gains there and loses other skills ("better math, worse
chat"); mixing tasks keeps them. Here the tiny model is cold-started by SFT on batches that are
half arithmetic traces and half digit sorting (`|83152=` -> `>12358`, rlvr.tasks.digit_sort),
until held-out arithmetic reaches ARITH_STOP (weak, so GRPO has room) with sorting at SORT_STOP.
Then, from that one checkpoint, `arith_only` trains on 3-digit additions and `mix` on the same
number of steps drawn from a pool that is half additions, half sorting problems. Both are
evaluated every 10 steps on the same 100 + 100 held-out problems; the loop logs one greedy
accuracy per verifier (`eval/arithmetic/accuracy`, `eval/digit_sort/accuracy`). Each arm runs
once per seed (GRPO seed: problem order and sampling). Writes runs/experiments/narrow_gains/
{verdict.md,result.json,curves.png}.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from experiments.common import ROOT, built_once, plot_panels, run_arm, say, write_problems, write_verdict
from rlvr.tasks.arithmetic import ArithmeticTask
from rlvr.tasks.digit_sort import DigitSortTask

NAME = "narrow_gains"
ARITH_STOP, SORT_STOP = 0.25, 0.6
NOISE = 0.10      # held-out sets of 100: differences under ~10 points are noise (see README)
SKILLS = {"arithmetic": "eval/arithmetic/accuracy", "digit_sort": "eval/digit_sort/accuracy"}


def skill_probe(model, tokenizer, n: int = 100):
    """evaluate(step) -> arithmetic accuracy; stores the last {skill: accuracy} in .last."""
    from rlvr.evaluation.metrics import greedy_accuracy
    from rlvr.rollout.hf import HFEngine
    from rlvr.tasks.arithmetic import ArithmeticVerifier
    from rlvr.tasks.digit_sort import DigitSortVerifier

    engine = HFEngine(model, tokenizer)
    probe = ArithmeticTask(3, "+").heldout(n, seed=99) + DigitSortTask().heldout(n, seed=99)
    verifiers = {"arithmetic": ArithmeticVerifier(), "digit_sort": DigitSortVerifier()}

    def evaluate(step: int) -> float:
        res = greedy_accuracy(engine, probe, verifiers, 48)
        evaluate.last = {k: res[v] for k, v in SKILLS.items()}
        say(f"  sft[two skills] step {step}: {evaluate.last}")
        model.train()
        # sft() stops when this reaches its threshold: report arithmetic only once sorting is there
        return res[SKILLS["arithmetic"]] if evaluate.last["digit_sort"] >= SORT_STOP else 0.0
    evaluate.last = {}
    return evaluate


def two_skill_cold_start(seed: int = 0) -> Path:
    """SFT on half arithmetic, half sorting until both thresholds hold; cached."""
    out = ROOT / "sft-two_skills"
    return built_once(out / "sft", lambda: _cold_start(out, seed))


def _cold_start(out: Path, seed: int) -> Path:
    from rlvr.models.policy import load_policy
    from rlvr.models.tiny import save_tiny_model
    from rlvr.training.sft import SFTConfig, sft, task_pairs

    save_tiny_model(out / "init", seed=seed)
    model, tokenizer = load_policy(str(out / "init"))
    arith = task_pairs(ArithmeticTask(3, "+"), tokenizer, 32, seed)
    sort = task_pairs(DigitSortTask(), tokenizer, 32, seed)
    batches = (a + s for a, s in zip(arith, sort))
    cfg = SFTConfig(steps=1500, stop_accuracy=ARITH_STOP, min_steps=100, seed=seed)
    sft(model, tokenizer, batches, cfg, evaluate=skill_probe(model, tokenizer))
    model.save_pretrained(out / "sft")
    tokenizer.save_pretrained(out / "sft")
    return out / "sft"


def start_accuracy(model_path: Path, heldout: Path) -> dict[str, float]:
    from rlvr.data import load_problems
    from rlvr.evaluation.metrics import greedy_accuracy
    from rlvr.models.policy import load_policy
    from rlvr.rollout.hf import HFEngine
    from rlvr.training.setup import build_verifiers

    model, tokenizer = load_policy(str(model_path))
    problems = load_problems(str(heldout))
    res = greedy_accuracy(HFEngine(model, tokenizer), problems,
                          build_verifiers({p.verifier for p in problems}, {}), 48)
    return {k: res[v] for k, v in SKILLS.items()}


def prepare() -> tuple[Path, Path, dict[str, Path]]:
    """The cold start, the 100 + 100 held-out file and the two training pools (deterministic)."""
    sft = two_skill_cold_start()
    d = ROOT / NAME / "data"
    rng = random.Random("narrow")
    add = ArithmeticTask(3, "+").sample(rng, 2000)
    srt = DigitSortTask().sample(rng, 1000)
    heldout = _concat(d / "heldout.jsonl",
                      write_problems(d / "heldout_arith.jsonl", ArithmeticTask(3, "+").heldout(100)),
                      write_problems(d / "heldout_sort.jsonl", DigitSortTask().heldout(100), "digit_sort"))
    pools = {"arith_only": write_problems(d / "train_arith.jsonl", add, "arithmetic"),
             "mix": _concat(d / "train_mix.jsonl", write_problems(d / "mix_a.jsonl", add[:1000]),
                            write_problems(d / "mix_s.jsonl", srt, "digit_sort"))}
    return sft, heldout, pools


def _concat(out: Path, *parts: Path) -> Path:
    """out = the parts one after the other, replaced atomically: arms running as parallel
    processes all prepare the same files, and none may read one half-written."""
    import os

    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    tmp.write_text("".join(p.read_text() for p in parts))
    os.replace(tmp, out)
    return out


def main(steps: int = 30, seeds: tuple[int, ...] = (0, 1), arms: tuple[str, ...] = ("arith_only", "mix"),
         verdict_only: bool = False) -> None:
    """Run the given (arm, seed) pairs, saving each to ROOT/NAME/done/; then write the verdict
    over every pair saved so far (so arms run as parallel processes merge into one verdict)."""
    import json
    import time

    sft, heldout, pools = prepare()
    start_file = ROOT / NAME / "done" / "cold_start.json"
    if not start_file.is_file():
        start_file.parent.mkdir(parents=True, exist_ok=True)
        start_file.write_text(json.dumps(start_accuracy(sft, heldout)))
    start = json.loads(start_file.read_text())
    say(f"cold start: {start}")
    for seed in () if verdict_only else seeds:
        for arm in arms:
            t0 = time.perf_counter()
            recs = run_arm(NAME, f"{arm}_s{seed}", [f"model.path={sft}", f"data.train_path={pools[arm]}",
                                                    f"data.eval_path={heldout}", f"grpo.steps={steps}",
                                                    f"seed={seed}", "run.eval_every=10"])
            pts = [(r["step"], {k: r[v] for k, v in SKILLS.items()}) for r in recs if SKILLS["digit_sort"] in r]
            (ROOT / NAME / "done" / f"{arm}_s{seed}.json").write_text(json.dumps(
                {"arm": arm, "seed": seed, "steps": steps, "curve": pts,
                 "wall_seconds": round(time.perf_counter() - t0, 1)}))
    runs, walls = {}, {}
    for f in sorted((ROOT / NAME / "done").glob("*_s*.json")):
        r = json.loads(f.read_text())
        if r.get("arm") and r["steps"] == steps:      # not cold_start.json
            runs[(r["arm"], r["seed"])] = [(s, a) for s, a in r["curve"]]
            walls[f"{r['arm']}_s{r['seed']}"] = r["wall_seconds"]
    verdict(runs, start, steps, sorted({s for _, s in runs}), walls)


def verdict(runs, start: dict[str, float], steps: int, seeds, walls: dict[str, float]) -> None:
    res = {"steps": steps, "seeds": list(seeds), "cold_start": start, "arms": {}, "arm_wall_seconds": walls}
    lines = [f"# Narrow gains ({steps} GRPO steps per arm, 8 prompts x G=16, seeds {list(seeds)}; "
             f"cold start: arithmetic {start['arithmetic']:.0%}, sorting {start['digit_sort']:.0%} "
             "on 100 + 100 held-out problems)", ""]
    delta = {}
    for (arm, seed), pts in runs.items():
        end = pts[-1][1]
        d = {k: end[k] - start[k] for k in SKILLS}
        delta.setdefault(arm, []).append(d)
        res["arms"][f"{arm}_s{seed}"] = {"curve": pts, "end": end, "change": d}
        lines.append(f"{arm} seed {seed}: arithmetic {start['arithmetic']:.0%} -> {end['arithmetic']:.0%}, "
                     f"sorting {start['digit_sort']:.0%} -> {end['digit_sort']:.0%}  (evals: "
                     + "; ".join(f"{s}: {a['arithmetic']:.0%}/{a['digit_sort']:.0%}" for s, a in pts) + ")")
    mean = {arm: {k: sum(x[k] for x in ds) / len(ds) for k in SKILLS} for arm, ds in delta.items()}
    spread = {arm: {k: max(x[k] for x in ds) - min(x[k] for x in ds) for k in SKILLS}
              for arm, ds in delta.items()}
    res.update(mean_change=mean, seed_spread=spread)
    if set(mean) != {"arith_only", "mix"}:
        lines += ["", "Verdict: not yet (both arms are needed; the other arm's process rewrites this)."]
    else:
        lines += _claim(mean, spread)
    lines += ["", "Wall seconds per arm (one process each, run in parallel on the loaded machine): "
              + ", ".join(f"{a} {w:.0f} s" for a, w in sorted(walls.items())) + "."]

    def plot(path):
        panels = []
        for skill in SKILLS:
            panels.append((f"{skill} held-out", {f"{arm}_s{seed}": [(0, start[skill])] +
                                                 [(s, a[skill]) for s, a in pts]
                                                 for (arm, seed), pts in runs.items()}))
        plot_panels(path, panels)
    write_verdict(NAME, res, lines, plot)


def _claim(mean, spread) -> list[str]:
    a, m = mean["arith_only"], mean["mix"]
    lost = a["digit_sort"] <= -NOISE
    kept = m["digit_sort"] > -NOISE
    claim = "holds" if lost and kept else "does NOT hold" if not lost else "half holds (both lose)"
    return ["", f"Mean change over seeds (spread between seeds in brackets): arith_only arithmetic "
                  f"{a['arithmetic']:+.0%} ({spread['arith_only']['arithmetic']:.0%}), sorting "
                  f"{a['digit_sort']:+.0%} ({spread['arith_only']['digit_sort']:.0%}); mix arithmetic "
                  f"{m['arithmetic']:+.0%} ({spread['mix']['arithmetic']:.0%}), sorting "
                  f"{m['digit_sort']:+.0%} ({spread['mix']['digit_sort']:.0%}).",
              "", f"Verdict: the claim {claim} here: GRPO on arithmetic alone "
                  f"{'loses' if lost else 'does not lose'} the sorting skill (a loss counts at "
                  f"{NOISE:.0%} or more), and the mix {'keeps' if kept else 'loses'} it."]


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="?", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--arms", nargs="+", default=["arith_only", "mix"], choices=["arith_only", "mix"])
    parser.add_argument("--verdict-only", action="store_true", help="rewrite the verdict from saved arms")
    args = parser.parse_args()
    main(args.steps, tuple(args.seeds), tuple(args.arms), args.verdict_only)
