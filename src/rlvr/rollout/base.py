"""The `RolloutEngine` protocol: G completions per problem with token ids, log-probs, finish reason.

Implementations: `hf.HFEngine` (in-process, shares the policy's weights; the CPU default). vLLM and
Ray engines plug in behind the same protocol as optional extras; the training loop never imports them.
The protocol is whole: it declares every member callers use (`prompts`, `version`, `model`,
`sync_metrics`, `close`), and `check_engine_protocol` refuses, at build time, an engine that lacks
one, or that lacks `continue_ids` (`TokenContinuer`) when the task plays episodes, or `share`
(`RunsAhead`) when rollouts run ahead of the update.
`Inner` is how a wrapper passes an inner engine's member on.
`PromptEncoder` is the one place prompts become token ids (chat template, pad id, vocabulary
limit) for every engine. Not checked: members' signatures and types (only their presence).
`EngineScored` is the verifier of problems whose engine scores its own completions (agent
episodes): `score_groups` keeps those scores and never re-verifies them.

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
  "processed_logprobs"`, and checks them against this definition in a test.) min-p truncates
  like top-k/top-p: after temperature, before top-k, tokens whose probability is below min_p
  times the largest are cut (vLLM's order), so μ is the renormalised rest and π / μ the kept mass.
  A repetition penalty (and vLLM keyword arguments in `extra`) reshapes the logits by the row's
  history, which the trainer's π never sees: only engines over vLLM apply it (their processed
  log-probs include it), and the config refuses it unless `grpo.is_correction` weights tokens by
  π / μ (`rlvr.config.checks.check_sampling`). Stop strings change no distribution: a row ends
  after the token that completes the first stop string (finish reason "stop"), its tokens and
  log-probs as sampled up to there; the text keeps the stop string with `include_stop_str`.
  Greedy decoding (`SamplingParams.greedy`, or temperature 0; used for evaluation only) records
  log_softmax(z) at T = 1; those are not behaviour log-probs.
- `Group.policy_version`: the version last passed to `load_weights` (the number of training
  steps the weights had seen); `Group.seed`: the `seed` argument of the call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from rlvr.models.policy import encode_prompt
from rlvr.types import Group, Problem, Score


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 48
    greedy: bool = False
    top_k: int = 0               # 0: no top-k truncation
    min_p: float = 0.0           # 0: off; else tokens below min_p x the top probability are cut
    repetition_penalty: float = 1.0   # 1: off (engines over vLLM only; see the contract above)
    stop: tuple[str, ...] = ()   # stop strings: the completion ends after the token completing one
    include_stop_str: bool = False    # keep the stop string in the completion's text
    extra: tuple[tuple[str, Any], ...] = ()   # more keyword arguments for vLLM's SamplingParams

    def __post_init__(self):
        # temperature 0 is greedy, as in vLLM (it divided the logits by zero: an index past the
        # vocabulary deep in sampling); a negative or NaN one is no temperature at all
        if not self.temperature >= 0:
            raise ValueError(f"SamplingParams.temperature must be >= 0 (0: greedy), got {self.temperature}")
        if self.temperature == 0 and not self.greedy:
            object.__setattr__(self, "greedy", True)


class RolloutEngine(Protocol):
    # how prompts become ids, the pad id and the vocabulary limit: one object wrappers pass on whole
    prompts: PromptEncoder
    version: int                 # the version last passed to `load_weights`
    model: Any                   # the in-process module it samples from; None when weights live elsewhere
    sync_metrics: dict[str, float]   # per-step metrics of the last weight sync ({} when none)

    def generate(self, problems: Sequence[Problem], n: int, params: SamplingParams,
                 seed: int) -> list[Group]:
        """n completions for each problem; deterministic given `seed` and the weights. Each group
        carries behaviour log-probs, `policy_version` and `seed` as the module docstring states."""
        ...

    def load_weights(self, policy, version: int = 0) -> None:
        """Bring the engine's weights up to date with the policy (no copy when shared) and stamp
        later groups with `version`."""
        ...

    def close(self) -> None:
        """Release what the engine holds (actors, servers, sandboxes); called once, at the end."""
        ...


class RunsAhead(Protocol):
    def share(self) -> RolloutEngine:
        """An engine for the rollouts generated ahead of the update (`rollout.max_staleness > 0`):
        its own weights version (and its own copy of the weights where they live here), fed by
        its own `load_weights`, safe to call from another thread while this one is idle."""
        ...


class TokenContinuer(Protocol):
    def continue_ids(self, prefixes: list[list[int]], params: SamplingParams,
                     gen) -> list[tuple[list[int], list[float], str]]:
        """One continuation per token-id prefix, never re-encoded: (tokens, behaviour log-probs,
        finish reason) each, drawn from the torch generator `gen` (multi-turn episodes)."""
        ...


def missing_members(obj, protocol: type) -> list[str]:
    """The members `protocol` declares (methods and annotated attributes) that `obj` lacks."""
    names = set(getattr(protocol, "__annotations__", {}))
    names |= {k for k, v in vars(protocol).items() if callable(v) and not k.startswith("_")}
    return sorted(n for n in names if not hasattr(obj, n))


def check_engine_protocol(engine, continues: bool = False, ahead: bool = False) -> None:
    """TypeError naming what `engine` lacks of `RolloutEngine` (and of `TokenContinuer` when
    `continues`, of `RunsAhead` when `ahead`), so a new engine fails when the run is built, not
    minutes into it."""
    missing = missing_members(engine, RolloutEngine)
    missing += missing_members(engine, TokenContinuer) if continues else []
    missing += missing_members(engine, RunsAhead) if ahead else []
    if missing:
        need = ("RolloutEngine" + (" + TokenContinuer (the task plays episodes)" if continues else "")
                + (" + RunsAhead (rollout.max_staleness > 0)" if ahead else ""))
        raise TypeError(f"{type(engine).__name__} is not a whole {need}: it lacks "
                        f"{', '.join(missing)}")


class Inner:
    """A wrapper's member that is its inner engine's, read through (`wrapper.inner.NAME`): a
    wrapper declares what it passes on in one line (`version, model = Inner(), Inner()`)."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None) -> Any:
        return self if obj is None else getattr(obj.inner, self.name)


class PromptEncoder:
    """Prompts as token ids, the same for every engine and for the trainer: chat template for
    messages when the tokenizer has one (and for text too with `template_text`), the pad id, and
    the vocabulary limit when the model's output layer is padded past the tokenizer."""

    def __init__(self, tokenizer, use_chat_template: bool = True, template_text: bool = False,
                 vocab_size: int | None = None):
        self.tokenizer, self.use_chat_template = tokenizer, use_chat_template
        self.template_text = template_text
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        n = len(tokenizer)
        self.vocab_limit = n if vocab_size is not None and n < vocab_size else None

    @classmethod
    def for_model(cls, model, tokenizer, use_chat_template: bool = True,
                  template_text: bool = False) -> "PromptEncoder":
        """The encoder of an engine sampling `model` (its output layer sets the vocabulary)."""
        vocab = model.get_output_embeddings().weight.shape[0]
        return cls(tokenizer, use_chat_template, template_text, vocab)

    def encode(self, problem: Problem) -> list[int]:
        return encode_prompt(self.tokenizer, problem, self.use_chat_template, self.template_text)

    def encode_all(self, problems: Sequence[Problem]) -> list[list[int]]:
        return [self.encode(p) for p in problems]


class EngineScored:
    """The verifier of problems whose engine scores each completion itself (an episode's
    environment, a verifiers rubric). `score_groups` keeps the engine's score; a completion that
    reaches verification without one is an error, never a silent reward of 0.
    `check_reference` is the owner's rule for its problems' references."""

    def __init__(self, name: str, check_reference: Callable[[Problem], None] = lambda p: None,
                 on_close: Callable[[], None] | None = None):
        self.name, self.check_reference, self._on_close = name, check_reference, on_close

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        raise RuntimeError(f"verifier {self.name!r}: its completions are scored by their engine "
                           "(an episode's environment); text alone cannot be scored here")

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()


def stamp(groups: Sequence[Group], version: int, seed: int) -> None:
    """Provenance of the behaviour-policy contract for engines that do not set it themselves:
    the version of the sampling weights (the last `load_weights`) and the call's seed."""
    for g in groups:
        g.policy_version, g.seed = version, seed
