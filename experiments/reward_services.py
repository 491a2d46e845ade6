"""A run whose rewards come from outside the trainer: a `{service: URL}` term (the shipped
`python -m rlvr.verifiers.serve arithmetic` on loopback) and an LLM-judge term (the tiny model's
cold start behind `rlvr.testing.chat_server`, an OpenAI-compatible endpoint).
Run: `python -m experiments.reward_services STEPS SFT_PATH` (a cold start, as for reward_norm).

The judge here is a mechanics check, not a good judge: the tiny arithmetic model continues
`{prompt}{response}` and its first digit / 9 is the verdict. Prints each term's mean per step
(rewards/<term>/mean), the crash rates and the judged/rule-based split from metrics.jsonl.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys

NAME = "reward_services"


def start(*cmd: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", *cmd], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("listening on "):
        raise RuntimeError(f"{cmd[0]} did not start: {line!r}")
    return proc, line.split()[-1]


def main(steps: int, model: str) -> None:
    from experiments.reward_norm import ROOT, train_arm, write_problems
    from rlvr.tasks.arithmetic import ArithmeticTask

    train = write_problems(ROOT / NAME / "data" / "train.jsonl",
                           ArithmeticTask(3, "+").sample(random.Random(NAME), 2000))
    servers = [start("rlvr.verifiers.serve", "arithmetic", "--port", "0"),
               start("rlvr.testing.chat_server", str(model))]
    (_, service), (_, judge) = servers
    terms = (f"[{{service: '{service}', name: remote_arithmetic}}, {{verifier: judge, name: judge, "
             f"weight: 0.5, options: {{url: '{judge}', template: '{{prompt}}{{response}}', "
             f"verdict: '(\\d)', max_score: 9, max_tokens: 8}}}}]")
    try:
        records = train_arm(NAME, "run", [f"model.path={model}", f"data.train_path={train}",
                                          f"data.reward_funcs={terms}", f"grpo.steps={steps}",
                                          "run.eval_every=0", "data.heldout_size=0"])
    finally:
        for proc, _ in servers:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    keys = sorted({k for r in records for k in r if k.startswith("rewards/")})
    for r in records:
        if "reward/mean" in r:
            print(f"step {r['step']:2d} " + " ".join(f"{k}={r[k]:.3f}" for k in keys if k in r)
                  + f" timing/verify={r['timing/verify']:.2f}s", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
