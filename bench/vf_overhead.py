"""What running a `verifiers` environment through `rlvr.agents.vf` costs over rlvr's own episode
loop, on the same work: the same tiny Llama, prompts, 3 turns of at most 12 sampled tokens, and
the same environment message ("more") after each turn. Baseline: `rlvr.agents.episode.run_episodes`
in the same run. The work is not identical: rlvr's loop ends an episode at a turn that hits its
token cap, verifiers' MultiTurnEnv goes on, so the ratio that compares is time per sampled token.
Engine calls are counted (rlvr's loop: one per turn; the server: one per request). The median of `--repeats` timings of each, after one warm-up call each.

    PYTHONPATH=src python bench/vf_overhead.py [--problems 4 --group 8 --repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main(argv: list[str] | None = None) -> int:
    import verifiers as vf
    from datasets import Dataset

    from rlvr.agents.env import Step, ToolCall
    from rlvr.agents.episode import Budget, run_episodes
    from rlvr.agents.vf import VerifiersRollouts, problems_from_env
    from rlvr.models.tiny import ASCII_CHARS, build_model
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.types import Score

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    model, tok = build_model(chars=ASCII_CHARS, max_positions=256)
    engine = HFEngine(model, tok)
    calls = {"n": 0}
    decode = engine.continue_ids

    def counted(*a, **kw):
        calls["n"] += 1
        return decode(*a, **kw)
    engine.continue_ids = counted
    params = SamplingParams(max_new_tokens=12)

    def length(completion, **kwargs) -> float:
        return len(completion[-1]["content"]) / 12

    class More(vf.MultiTurnEnv):
        async def env_response(self, messages, state, **kwargs):
            return [vf.UserMessage(content="more")]

    rows = [{"question": f"say {i}", "answer": str(i)} for i in range(args.problems)]
    env = More(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[length]), max_turns=3)
    problems = problems_from_env(env)

    class MoreEnv:          # rlvr's protocol, answering "more" to every turn
        def reset(self, problem): pass
        def step(self, call): return Step("more")
        def score(self): return Score(0.0, False)
        def close(self): pass

    class Always:           # every turn continues, rendered as the server renders "more"
        def parse(self, turn): return ToolCall("more")
        def render(self, obs): return f"\nuser: {obs}\nassistant:"

    budget = Budget(max_turns=3, max_tokens=10_000, turn_tokens=12)
    rollouts = VerifiersRollouts(env, engine, tok, max_new_tokens=12)
    runs = {"rlvr run_episodes": lambda s: run_episodes(engine, tok, problems, args.group,
                                                          lambda p: MoreEnv(), params, s, budget,
                                                          fmt=Always()),
            "verifiers env via agents/vf": lambda s: rollouts.generate(problems, args.group, params, s)}
    times, tokens, n_calls = {}, {}, {}
    try:
        for name, run in runs.items():
            run(0)
            samples, calls["n"] = [], 0
            for r in range(args.repeats):
                t0 = time.perf_counter()
                groups = run(r + 1)
                samples.append(time.perf_counter() - t0)
            times[name] = statistics.median(samples)
            tokens[name] = sum(sum(c.loss_mask) for g in groups for c in g.completions)
            n_calls[name] = calls["n"] / args.repeats
    finally:
        rollouts.close()
    per_token = {k: times[k] / tokens[k] for k in times}
    base = per_token["rlvr run_episodes"]
    print(f"{args.problems} problems x {args.group} rollouts x 3 turns (<= 12 tokens each), "
          f"median of {args.repeats}, 1 thread")
    for name in runs:
        print(f"  {name:30s} {times[name]:.3f} s, {tokens[name]} sampled tokens (last call), "
              f"{n_calls[name]:.1f} engine calls, {1000 * per_token[name]:.2f} ms/token, "
              f"ratio {per_token[name] / base:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
