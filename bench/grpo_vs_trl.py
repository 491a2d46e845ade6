"""rlvr vs TRL `GRPOTrainer`: the same tiny model, prompts, reward and hyper-parameters, one run.

Setup, once (TRL is never a dependency of rlvr, so it lives in its own venv):

    python3 -m venv .venv-bench
    .venv-bench/bin/pip install torch==2.13.0
    .venv-bench/bin/pip install trl==1.16.0 -e .

Run (from the repository root):

    .venv-bench/bin/python bench/grpo_vs_trl.py --steps 30

What it does: builds the embedded tiny Llama and gives it rlvr's SFT cold start (reasoner traces
until a held-out probe reaches --stop-accuracy, so that sampled reward is non-trivial; cached in
--workdir), then trains two copies of that checkpoint for --steps GRPO steps, one with TRL and one
with `rlvr.train.train`, on the same prompts (rlvr's per-step draws, fed to TRL in order), the same
reward (rlvr's arithmetic verifier, wrapped as a TRL reward function), group size, prompts per
step, max completion length, temperature, learning rate (constant), Adam betas, clip and loss
(token-mean, no KL). The two trainers take turns step by step (TRL step k, then rlvr step k), so
load from other processes hits both alike. Each step's seconds and completion tokens are
recorded; at the end both final models are scored greedily on the same held-out problems.

Printed: seconds per step and completion tokens per second (median and range over steps, the first
--warmup steps excluded), mean sampled reward of the last 5 steps, held-out greedy accuracy, and one
JSON line with `ratio` = rlvr tokens/s ÷ TRL tokens/s (medians). Precision is reported, not hidden:
by default rlvr runs with `model.autocast_bf16=true` and TRL with its default float32
(`--trl-bf16` gives TRL bf16 autocast too; `--no-rlvr-bf16` runs rlvr in float32).

`--model DIR` trains a real checkpoint instead (no cold start) on `word_problems` (chat messages,
the `math` verifier for both trainers), and adds per-stage times (generate / verify / update)
against each stage's matmul floor and peak RSS per turn (bench/stages.py); see bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import threading
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from stages import RssByTurn, TrlStages, cpu_name, rlvr_stages, stage_line, stage_summary  # noqa: E402


def _require_trl():
    try:
        import trl  # noqa: F401
    except ImportError:
        sys.exit("bench/grpo_vs_trl.py needs TRL, which rlvr never depends on. Set up its venv once:\n"
                 "  python3 -m venv .venv-bench && .venv-bench/bin/pip install torch==2.13.0 &&\n"
                 "  .venv-bench/bin/pip install trl==1.16.0 -e .\n"
                 "then run: .venv-bench/bin/python bench/grpo_vs_trl.py")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=2, help="first steps left out of the timing stats")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--prompts", type=int, default=16, help="prompts per step")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: the run.threads default, 1 on <= 2 cores)")
    p.add_argument("--stop-accuracy", type=float, default=0.2, help="SFT cold start stops here")
    p.add_argument("--heldout", type=int, default=200, help="held-out problems for the final accuracy")
    p.add_argument("--workdir", default=str(REPO / "runs" / "bench_grpo_vs_trl"))
    p.add_argument("--trl-bf16", action="store_true", help="TRL with bf16 autocast (default float32)")
    p.add_argument("--rlvr-bf16", dest="rlvr_bf16", action="store_true", default=None,
                   help="rlvr with model.autocast_bf16=true (default: only where the CPU has native bf16)")
    p.add_argument("--no-rlvr-bf16", dest="rlvr_bf16", action="store_false", help="rlvr in float32")
    p.add_argument("--seeds", type=int, nargs="+", help="several seeds, one interleaved run each "
                   "(separate processes): held-out accuracy as mean ± standard error, ratio as the median")
    p.add_argument("--model", help="a real checkpoint directory (e.g. SmolLM2-135M-Instruct) instead of the "
                   "tiny model's cold start; prompts go through its chat template for both trainers")
    p.add_argument("--difficulty", type=int, help="digits per operand (default: the task preset's)")
    p.add_argument("--task", choices=["arithmetic", "word_problems"],
                   help="default: word_problems with --model (chat messages, answers read by the math "
                   "verifier in any format), arithmetic for the tiny model")
    p.add_argument("--quick", action="store_true", help="with --model: 6 steps (1 warm-up), 4 prompts x 8, "
                   "64 new tokens, temperature 0.7, lr 1e-5, 32 held-out problems: one interleaved run in "
                   "minutes (explicit options still win)")
    p.add_argument("--busy", action="store_true", help="keep one extra busy-looping process running "
                   "during the runs (the 'another process on one core' condition)")
    if p.parse_known_args(argv)[0].quick:
        p.set_defaults(steps=6, warmup=1, prompts=4, group_size=8, max_new_tokens=64, heldout=32,
                       lr=1e-5, temperature=0.7)
    args = p.parse_args(argv)
    if args.task is None:
        args.task = "word_problems" if args.model else "arithmetic"
    if args.rlvr_bf16 is None:
        args.rlvr_bf16 = native_bf16()
    return args


def native_bf16() -> bool:
    """Whether this CPU computes in bf16 natively (AVX512-BF16 / AMX). Without it (AVX2-only
    CPUs) PyTorch emulates bf16 and every op gets slower than in float32, so bf16 is no win."""
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def rlvr_config(args, sft_path: Path, run_dir: Path):
    from rlvr import config as config_mod

    return config_mod.load("quickstart", [
        f"seed={args.seed}", f"model.path={sft_path}", f"model.autocast_bf16={str(args.rlvr_bf16).lower()}",
        f"run.dir={run_dir}", "run.resume=never", "run.eval_every=0", "run.save_every=0",
        "run.progress=false", "run.report=false", "run.transcripts_every=0", f"run.threads={args.threads}",
        "data.heldout_size=0", f"rollout.temperature={args.temperature}",
        f"rollout.max_new_tokens={args.max_new_tokens}", f"grpo.steps={args.steps}",
        f"grpo.group_size={args.group_size}", f"grpo.prompts_per_step={args.prompts}",
        f"grpo.lr={args.lr}", "grpo.lr_schedule=constant", "grpo.adam_betas=[0.9, 0.99]",
        "grpo.weight_decay=0.0", "grpo.grad_clip=1.0", "grpo.beta=0.0", "grpo.eps_low=0.2",
        "grpo.eps_high=0.2", "grpo.advantage=group", "grpo.loss_agg=token-mean", "grpo.mu=1",
        *([f"data.difficulty={args.difficulty}"] if args.difficulty else []),
        *(["data.task=word_problems", "data.ops=+-"] if args.task == "word_problems" else []),
        *(["data.difficulty=2"] if args.task == "word_problems" and not args.difficulty else []),
        # the smollm2 preset's micro-batches: the 49k-vocabulary logits never whole
        *(["model.chat_template_text=true", "grpo.micro_batch_tokens=2048"] if args.model else [])])


def cold_start_checkpoint(args, cfg, say) -> Path:
    """rlvr's SFT cold start, cached in the workdir per (seed, stop accuracy)."""
    from rlvr.cli.quickstart import cold_start

    out = Path(args.workdir) / f"cold_start_seed{args.seed}_acc{args.stop_accuracy}"
    if (out / "sft" / "config.json").is_file():
        say(f"cold start: reusing {out / 'sft'}")
        return out / "sft"
    say(f"cold start: rlvr SFT until {args.stop_accuracy:.0%} on a held-out probe (cached afterwards)")
    cold_start(cfg, out, args.stop_accuracy, say)
    return out / "sft"


class Baton:
    """Strict alternation between the two trainers: only one of them computes at any moment."""

    def __init__(self):
        self.rlvr_turn = threading.Semaphore(0)
        self.trl_turn = threading.Semaphore(0)
        self.rlvr_ready = threading.Event()   # rlvr has built its run (and seeded torch's global RNG)

        self.after_pair = lambda: None        # run after each (TRL step, rlvr step) pair
        self.on_turn = lambda name: None      # told who computes now ("trl", "rlvr", "floor")

    def pass_to_rlvr(self):
        self.rlvr_turn.release()
        self.trl_turn.acquire()
        self.after_pair()


def run_rlvr(cfg, baton: Baton, result: dict) -> None:
    """`rlvr.train.train(cfg)` unchanged, except that each step waits for its turn."""
    import rlvr.train
    from rlvr.training.runlog import RunLog

    steps = RunLog.steps

    def taking_turns(log, start):
        baton.rlvr_ready.set()
        for step in steps(log, start):
            baton.rlvr_turn.acquire()
            baton.on_turn("rlvr")
            log.begin_step(step)      # the step's clock starts when it gets its turn
            yield step
            baton.trl_turn.release()

    RunLog.steps = taking_turns
    try:
        result["summary"] = rlvr.train.train(cfg)
    except BaseException as exc:  # surface it in the main thread instead of dying silently
        result["error"] = exc
        baton.rlvr_ready.set()
        baton.trl_turn.release()
        raise
    finally:
        RunLog.steps = steps


def verifier_reward(verifier, name: str):
    """A TRL reward function scoring with rlvr's own verifier of the task. TRL hands conversational
    completions as message lists; the verifier reads the assistant message's text."""
    from rlvr.types import Problem

    def task_reward(completions, reference, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        refs = [Problem(id="", prompt="", reference=r, verifier=name) for r in reference]
        return [s.reward for s in verifier.score_batch(texts, refs)]

    return task_reward


def trl_trainer(args, sft_path: Path, problems, verifier, out_dir: Path, baton: Baton, times: list,
                stages):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    task_reward = verifier_reward(verifier, problems[0].verifier)

    class TakeTurns(TrainerCallback):
        def on_step_begin(self, *_, **__):
            baton.on_turn("trl")
            self.t0 = time.perf_counter()

        def on_step_end(self, *_, **__):
            times.append(time.perf_counter() - self.t0)
            stages.end_step(times[-1])
            baton.pass_to_rlvr()

    def prompt(p):   # messages as they are; text through a real model's chat template, as rlvr's
        if isinstance(p.prompt, list):   # model.chat_template_text=true
            return p.prompt
        return [{"role": "user", "content": p.prompt}] if args.model else p.prompt

    data = Dataset.from_list([{"prompt": prompt(p), "reference": p.reference} for p in problems])
    gcfg = GRPOConfig(
        output_dir=str(out_dir), per_device_train_batch_size=args.prompts * args.group_size,
        gradient_accumulation_steps=1, num_generations=args.group_size,
        max_completion_length=args.max_new_tokens, temperature=args.temperature, top_p=1.0, top_k=0,
        learning_rate=args.lr, lr_scheduler_type="constant", warmup_steps=0, adam_beta1=0.9,
        adam_beta2=0.99, weight_decay=0.0, max_grad_norm=1.0, beta=0.0, epsilon=0.2,
        loss_type="dapo", scale_rewards="group", num_iterations=1, max_steps=args.steps,
        shuffle_dataset=False, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True,
        bf16=args.trl_bf16, seed=args.seed, disable_tqdm=True, dataloader_num_workers=0)
    model = AutoModelForCausalLM.from_pretrained(sft_path, dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(sft_path, padding_side="left")
    trainer = GRPOTrainer(model=model, reward_funcs=task_reward, args=gcfg, train_dataset=data,
                          processing_class=tokenizer, callbacks=[TakeTurns()])
    trainer.remove_callback(PrinterCallback)   # its per-step dicts would bury the summary
    return trainer


def heldout_accuracy(model, tokenizer, problems, max_new: int, verifiers: dict,
                     template: bool = False) -> float:
    from rlvr.evaluation.metrics import greedy_accuracy
    from rlvr.rollout.hf import HFEngine

    engine = HFEngine(model, tokenizer, template_text=template)
    return greedy_accuracy(engine, problems, verifiers, max_new)["eval/accuracy"]


def peak_rss_mb() -> float:
    """The process's peak resident memory so far: both trainers (two models, two optimizers) live
    in this one process, so this bounds the two together, not either alone."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summarize(name: str, secs: list[float], tokens: list[float], warmup: int) -> dict:
    secs, tokens = secs[warmup:], tokens[warmup:]
    tps = [t / s for t, s in zip(tokens, secs)]
    return {"name": name, "s_per_step": statistics.median(secs), "s_range": [min(secs), max(secs)],
            "tok_per_s": statistics.median(tps), "tok_range": [min(tps), max(tps)],
            "tokens_per_step": statistics.median(tokens)}


def bare_math_seconds(model, dtype, prefill_tokens: int, rows: int, new_tokens: int,
                      train_tokens: int, repeats: int = 5) -> dict[str, float]:
    """The step's model arithmetic alone: every linear layer's matmul at the step's shapes and dtype.

    Sampling: the prompts once (`prefill_tokens`), then `rows` rows through every matrix per
    generated token; update: forward and backward (input and weight gradients) over
    `train_tokens` tokens. Attention (≈ 1 % of the FLOPs at these lengths), norms, sampling and
    bookkeeping are left out on purpose: the floor is what no implementation can avoid.
    Inputs are made before the clock starts. Median of `repeats` timings, per stage ("generate",
    "update"; the update's is 6 x linear parameters x `train_tokens` FLOPs at this run's matmul rate).
    """
    import torch
    import torch.nn.functional as F

    weights = [m.weight.detach().to(dtype) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    trainable = [w.clone().requires_grad_() for w in weights]
    gen = torch.Generator().manual_seed(0)   # not the global RNG: TRL samples from that one

    def data(n, w):
        return torch.randn(n, w.shape[1], generator=gen).to(dtype)

    prefill, step = [data(prefill_tokens, w) for w in weights], [data(rows, w) for w in weights]
    train = [data(train_tokens, w).requires_grad_() for w in weights]
    from rlvr.models import fused_llama

    packed, linear = weights, F.linear   # sampling: prepacked bf16 matrices, the engine's kernel
    if fused_llama._packable(dtype, weights[0]):
        packed, linear = [fused_llama._pack(w) for w in weights], fused_llama._packed_linear
    times: dict[str, list[float]] = {"generate": [], "update": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        with torch.no_grad():
            for x, w in zip(prefill, packed):
                linear(x, w)
            for _ in range(new_tokens):
                for x, w in zip(step, packed):
                    linear(x, w)
        t1 = time.perf_counter()
        sum(F.linear(x, w).float().sum() for x, w in zip(train, trainable)).backward()
        times["generate"].append(t1 - t0)
        times["update"].append(time.perf_counter() - t1)
    return {k: statistics.median(v) for k, v in times.items()}


def _trl_history(trainer) -> tuple[list[float], list[float]]:
    """Per-step completion tokens and mean reward from TRL's own log."""
    rows = [r for r in trainer.state.log_history if "completions/mean_length" in r]
    return [r["completions/mean_length"] for r in rows], [r["reward"] for r in rows]


def _rlvr_history(run_dir: Path) -> tuple[list, ...]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "timing/step" in r]
    return ([r["timing/step"] for r in rows], [r["completions/total_tokens"] for r in rows],
            [r["reward/mean"] for r in rows], rlvr_stages(rows))


def train_both(args, cfg, sft_path: Path, problems, verifier, floors: "Floors", rss: RssByTurn, say) -> dict:
    """TRL and rlvr from the same checkpoint, taking turns step by step."""
    baton, result, trl_secs, trl_stages = Baton(), {}, [], TrlStages()
    baton.on_turn = lambda name: setattr(rss, "turn", name)
    trl_stages.install()
    for old in (Path(cfg.run.dir), Path(args.workdir) / "trl"):   # each invocation starts fresh
        shutil.rmtree(old, ignore_errors=True)
    worker = threading.Thread(target=run_rlvr, args=(cfg, baton, result), daemon=True)
    worker.start()
    baton.rlvr_ready.wait()
    trainer = trl_trainer(args, sft_path, problems, verifier, Path(args.workdir) / "trl", baton, trl_secs,
                          trl_stages)

    def after_pair():   # TRL's mean completion length of the step just taken (logged only later)
        baton.on_turn("floor")
        floors.measure(trainer._metrics["train"]["completions/mean_length"][-1])

    baton.after_pair = after_pair
    say(f"training {args.steps} steps each, alternating TRL and rlvr step by step")
    trainer.train()
    worker.join()
    baton.on_turn("eval")
    if "error" in result:
        raise RuntimeError("rlvr training failed") from result["error"]
    lengths, trl_rewards = _trl_history(trainer)
    batch = args.prompts * args.group_size
    rlvr_secs, rlvr_tokens, rlvr_rewards, rlvr_steps = _rlvr_history(Path(cfg.run.dir))
    return {"trl": (trl_secs, [m * batch for m in lengths], trl_rewards, trainer.model, trl_stages.steps),
            "rlvr": (rlvr_secs, rlvr_tokens, rlvr_rewards, Path(cfg.run.dir) / "final", rlvr_steps)}


class Floors:
    """Per-step bare-math floors (see bare_math_seconds), measured right after each pair of steps so
    that they see the same machine load as the steps they are compared with."""

    def __init__(self, args, model, run_dir: Path, prompt_len: int):
        import torch

        self.args, self.model, self.run_dir, self.prompt_len = args, model, run_dir, prompt_len
        dtype = {True: torch.bfloat16, False: torch.float32}
        self.dtypes = {"rlvr": dtype[args.rlvr_bf16], "trl": dtype[args.trl_bf16]}
        self.seconds: dict[str, list[dict[str, float]]] = {"rlvr": [], "trl": []}
        self.trained_rows: list[float] = []
        self.trained_tokens: dict[str, list[int]] = {"rlvr": [], "trl": []}

    def measure(self, trl_mean_length: float) -> None:
        lines = (self.run_dir / "metrics.jsonl").read_text().splitlines()
        # the last step's line: event lines (alarms) can follow it
        last = next(r for r in map(json.loads, reversed(lines)) if "completions/total_tokens" in r)
        rows = self.args.prompts * self.args.group_size
        news = {"rlvr": max(1, round(last["completions/total_tokens"] / rows)),
                "trl": max(1, round(trl_mean_length))}
        self.trained_rows.append(last.get("active_fraction", 1.0) * rows)
        # rlvr trains only rows with a non-zero advantage; TRL runs every row through fwd + bwd
        for name, trained in (("rlvr", self.trained_rows[-1]), ("trl", rows)):
            tokens = round(trained * (self.prompt_len + news[name]))
            self.trained_tokens[name].append(tokens)
            floor = bare_math_seconds(self.model, self.dtypes[name], self.args.prompts * self.prompt_len,
                                      rows, news[name], max(1, tokens), repeats=1)
            if tokens == 0:   # no row carried signal: rlvr skipped the update, so its floor is nil
                floor["update"] = 0.0
            self.seconds[name].append(floor)

    def share(self, name: str, step_secs: list[float]) -> dict:
        w = self.args.warmup
        floors = [sum(f.values()) for f in self.seconds[name][w:]]
        shares = [1 - f / s for f, s in zip(floors, step_secs[w:])]
        return {"bare_math_floor_s": statistics.median(floors),
                "non_arithmetic_share": statistics.median(shares),
                "non_arithmetic_range": [min(shares), max(shares)]}


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    _require_trl()
    sys.path.insert(0, str(Path(__file__).parent))
    from seeds import busy_process, run_seeds

    if args.seeds:
        return run_seeds(Path(__file__), argv, args.seeds, args.busy)
    with busy_process(args.busy):
        return one_run(args)


def one_run(args) -> dict:
    from rlvr import config as config_mod
    from rlvr.models.device import cpu_computes_bf16, host_allocator
    from rlvr.models.policy import encode_prompt, load_policy
    from rlvr.models.quiet import quiet_transformers
    from rlvr.tasks.base import build_task
    from rlvr.training.setup import set_threads
    from rlvr.sampling.sampler import TaskSampler

    quiet_transformers()
    warnings.filterwarnings("ignore", category=FutureWarning)   # transformers' renames, not ours
    set_threads(args.threads)
    say = print
    cfg = rlvr_config(args, Path("builtin:tiny-llama"), Path(args.workdir) / "rlvr")
    sft_path = Path(args.model) if args.model else cold_start_checkpoint(args, cfg, say)
    cfg = config_mod.replace(cfg, [f"model.path={sft_path}"])
    task = build_task(cfg)
    sampler = TaskSampler(task, args.prompts, args.seed)   # the draws rlvr's run makes, step by step
    problems = [p for step in range(args.steps) for p in sampler.next_batch(step)]
    heldout, verifiers = task.heldout(args.heldout), task.verifiers()
    say(f"CPU: {cpu_name()}; native bf16: {cpu_computes_bf16()}; allocator: {host_allocator()} "
        f"(both trainers); task {args.task}")
    sft_model, tokenizer = load_policy(str(sft_path))
    start_acc = heldout_accuracy(sft_model, tokenizer, heldout, args.max_new_tokens, verifiers,
                                 bool(args.model))
    say(f"cold-start held-out greedy accuracy: {start_acc:.1%} on {len(heldout)} problems")
    prompt_len = round(statistics.median(len(encode_prompt(tokenizer, p, True, bool(args.model)))
                                         for p in problems))
    floors, rss = Floors(args, sft_model, Path(cfg.run.dir), prompt_len), RssByTurn()
    runs = train_both(args, cfg, sft_path, problems, verifiers[problems[0].verifier], floors, rss, say)
    report = {"model": args.model or "tiny cold start", "task": args.task, "cpu": cpu_name(),
              "native_bf16": cpu_computes_bf16(), "allocator": host_allocator(), "seed": args.seed,
              "steps": args.steps,
              "warmup_steps_excluded": args.warmup,
              "threads": __import__("torch").get_num_threads(), "group_size": args.group_size,
              "prompts_per_step": args.prompts, "max_new_tokens": args.max_new_tokens,
              "lr": args.lr, "temperature": args.temperature, "cold_start_accuracy": start_acc,
              "precision": {"rlvr": "bf16-autocast" if args.rlvr_bf16 else "fp32",
                            "trl": "bf16-autocast" if args.trl_bf16 else "fp32"}}
    for name, (secs, tokens, rewards, model, steps) in runs.items():
        model = load_policy(str(model))[0] if isinstance(model, Path) else model
        stats = summarize(name, secs, tokens, args.warmup)
        stats.update(floors.share(name, secs))
        stats["stages"] = stage_summary(steps, secs, floors.seconds[name], args.warmup)
        stats["trained_tokens_per_step"] = statistics.median(floors.trained_tokens[name][args.warmup:])
        stats["reward_last5"] = statistics.mean(rewards[-5:])
        stats["heldout_accuracy"] = heldout_accuracy(model, tokenizer, heldout, args.max_new_tokens,
                                                     verifiers, bool(args.model))
        report[name] = stats
        say(f"{name:5s} {stats['s_per_step']:.3f} s/step [{stats['s_range'][0]:.3f}, "
            f"{stats['s_range'][1]:.3f}]  {stats['tok_per_s']:.0f} tok/s [{stats['tok_range'][0]:.0f}, "
            f"{stats['tok_range'][1]:.0f}]  reward(last 5 steps) {stats['reward_last5']:.3f}  "
            f"held-out accuracy {stats['heldout_accuracy']:.1%}  not arithmetic "
            f"{stats['non_arithmetic_share']:.0%} (floor {stats['bare_math_floor_s']:.3f} s)")
        say(stage_line(name, stats["stages"]) + f"; trained tokens {stats['trained_tokens_per_step']:.0f}")
    report["ratio"] = report["rlvr"]["tok_per_s"] / report["trl"]["tok_per_s"]
    report["load_avg_1min"] = __import__("os").getloadavg()[0]
    report["peak_rss_mb_both_trainers"] = peak_rss_mb()
    report["peak_rss_mb_during"] = rss.stop()   # idle: both loaded, before the first step
    say(f"peak RSS (MB) while each held the turn (both trainers resident): {report['peak_rss_mb_during']}")
    report["reward_rlvr"], report["reward_trl"] = report["rlvr"]["reward_last5"], report["trl"]["reward_last5"]
    report["accuracy_rlvr"], report["accuracy_trl"] = (report["rlvr"]["heldout_accuracy"],
                                                       report["trl"]["heldout_accuracy"])
    report["rlvr_non_arithmetic_share"] = report["rlvr"]["non_arithmetic_share"]
    report["rlvr_trained_rows_per_step"] = statistics.median(floors.trained_rows[args.warmup:])
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    # both trainers on the allocator the `rlvr` command runs on (`rlvr.cli.allocator`: mimalloc where
    # installed); they share this process, so TRL gets it too. RLVR_ALLOCATOR=system: glibc's.
    from rlvr.cli.allocator import reexec_preloaded

    reexec_preloaded([__file__, *sys.argv[1:]])
    main()
