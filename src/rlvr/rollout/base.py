"""The `RolloutEngine` protocol: G completions per problem with token ids, log-probs, finish reason.

Implementations: `hf.HFEngine` (in-process, shares the policy's weights; the CPU default). vLLM and
Ray engines plug in behind the same protocol as optional extras; the training loop never imports them.

The behaviour-policy contract (every engine honours it; the importance-sampling correction in
`rlvr.algo.offpolicy` relies on it):

- token ids exactly as sampled, never re-tokenised from text; the finish reason ("stop": an EOS
  token, which is the last id; "length": hit max_new_tokens);
- one behaviour log-prob per token: log μ(token), where μ is the distribution the token was
  actually drawn from. With logits z, temperature T, top-k K and top-p P, μ is softmax(z / T)
  restricted to the K most likely tokens (K = 0: all), then to the smallest prefix of those, by
  descending probability, whose mass reaches P (mass computed on the top-k-renormalised
  distribution, as vLLM does), then renormalised. With K = 0 and P = 1 this is log_softmax(z / T).
  It is NOT the raw (temperature-1) log-prob and NOT the log-prob under the full softmax(z / T)
  when top-k / top-p truncate: the trainer computes log π under the full softmax(z / T), so with
  truncation the measured ratio π / μ is the kept mass (≤ 1), the true off-policy gap.
  (An engine over vLLM asks for log-probs after its logits processing, `logprobs_mode=
  "processed_logprobs"`, and checks them against this definition in a test.) Greedy decoding (`SamplingParams.greedy`, used
  for evaluation only) records log_softmax(z) at T = 1; those are not behaviour log-probs.
- `Group.policy_version`: the version last passed to `load_weights` (the number of training
  steps the weights had seen); `Group.seed`: the `seed` argument of the call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from rlvr.types import Group, Problem


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 48
    greedy: bool = False
    top_k: int = 0               # 0: no top-k truncation


class RolloutEngine(Protocol):
    def generate(self, problems: Sequence[Problem], n: int, params: SamplingParams,
                 seed: int) -> list[Group]:
        """n completions for each problem; deterministic given `seed` and the weights. Each group
        carries behaviour log-probs, `policy_version` and `seed` as the module docstring states."""
        ...

    def load_weights(self, policy, version: int = 0) -> None:
        """Bring the engine's weights up to date with the policy (no copy when shared) and stamp
        later groups with `version`."""
        ...


def stamp(groups: Sequence[Group], version: int, seed: int) -> None:
    """Provenance of the behaviour-policy contract for engines that do not set it themselves:
    the version of the sampling weights (the last `load_weights`) and the call's seed."""
    for g in groups:
        g.policy_version, g.seed = version, seed
