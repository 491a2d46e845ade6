"""The training doctor: reads each step's metric record and raises alarms with a cause and an action.

`Doctor.observe(step, record)` returns a list of {"name", "message", "action"} dicts; `RunLog.step`
prints each as a console warning and writes it to `metrics.jsonl` as an event line, which the
report lists. Alarms (thresholds in `DoctorConfig`, K = `window`):

  truncation      completions/clipped_ratio > clipped_max (most completions hit the length cap)
  zero_variance   frac_reward_zero_std > zero_std_max for K steps in a row
  reward_flat     reward/mean moved less than flat_range over the last K steps
  entropy_collapse / entropy_blowup   entropy below entropy_low x / above entropy_high x its
                  baseline (the mean of the first K steps that report entropy)
  kl_blowup       kl > kl_max
  ratio_extreme   ratio/max > ratio_max or ratio/min < 1 / ratio_max (the PPO ratio π/π_old: the
                  policy moved far within one batch; only possible with μ > 1 or minibatches)
  rollout_mismatch  the behaviour policy and the trainer disagree (`rlvr.algo.offpolicy` metrics):
                  mismatch/ratio_max > ratio_max, mismatch/ratio_min < 1 / ratio_max, or
                  mismatch/kl > mismatch_kl_max. The advice follows the configuration: stale
                  rollouts, no correction, or a correction that caps many tokens.
  length_explosion  completions/mean_length > length_growth x its baseline
  non_finite      loss, grad_norm, kl or entropy is NaN/inf
  task_zero_variance  in a run mixing verifiers: one verifier's reward/<v>/frac_zero_std above
                  zero_std_max in each of the last K steps (the batch-wide fraction can hide it)
  tampering       behaviour/tamper_rate > tamper_max (agent episodes that tried to change a test)
  reward_crash    rewards/<term>/crash_rate > 0: a reward function raised or timed out, and its
                  completions were scored 0 (`rlvr.monitor.crashes`; the traceback is the event)
  judge_rise      rewards/judged/mean (judge and reward-model terms) rose by more than judge_rise
                  over the last K steps while rewards/rule_based/mean rose by less than flat_range:
                  the policy may be learning what the model likes rather than what is right
  distill_kl_rising  on-policy distillation (`distill.teacher`): distill/kl, the per-token reverse
                  KL to the teacher on the student's samples, rose in >= 80% of the last K − 1
                  step-to-step changes and by more than distill_kl_rise overall: the student is
                  moving away from the teacher (a verifier term outweighing distill.coef, or lr
                  too high). distill/teacher_logp and distill/student_logp are tracked, not alarmed.

An alarm that fired is silent for `cooldown` steps. The state (recent records, baselines, last
firing) is plain Python and saved in checkpoints, so a resumed run raises the same alarms.

`behaviour_metrics(groups)` is tracked every step, not alarmed: the share of responses with a
reflective phrase ("wait", "let me check", "verify", ...), the share mixing letters of two or more
Unicode scripts (kana and Han count as one: Japanese writes both), and the multi-answer rate from
the verifier flag `multiple_answers`.
Not guaranteed: thresholds suit the built-in task; real models need their own.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

from rlvr.types import Group
from rlvr.verifiers.language import writing_systems

Alarm = dict[str, str]
REFLECTIVE = re.compile(r"\b(wait|let me (?:check|verify|re-?check)|verify|double[- ]check|"
                        r"hmm|on second thought)\b", re.IGNORECASE)
_TRACKED = ("reward/mean", "frac_reward_zero_std", "completions/clipped_ratio",
            "completions/mean_length", "entropy", "kl", "ratio/max", "ratio/min", "loss", "grad_norm",
            "behaviour/tamper_rate", "mismatch/kl", "mismatch/ratio_max", "mismatch/ratio_min",
            "mismatch/truncated_frac", "mismatch/masked_frac", "rewards/judged/mean",
            "rewards/rule_based/mean", "distill/kl")


def behaviour_metrics(groups: Sequence[Group]) -> dict[str, float]:
    texts = [c.text for g in groups for c in g.completions]
    flags = [c.score.flags if c.score else () for g in groups for c in g.completions]
    n = max(1, len(texts))
    mixed = sum(len(writing_systems(t)) >= 2 for t in texts)  # kana + Han is one (Japanese)
    return {"behaviour/reflection_rate": sum(bool(REFLECTIVE.search(t)) for t in texts) / n,
            "behaviour/mixed_script_rate": mixed / n,
            "behaviour/multi_answer_rate": sum("multiple_answers" in f for f in flags) / n,
            "behaviour/tamper_rate": sum("tamper_attempt" in f for f in flags) / n}


def _finite(x: Any) -> bool:
    return not isinstance(x, float) or math.isfinite(x)


class Doctor:
    def __init__(self, cfg: Any):
        self.c = cfg.doctor
        self.cfg = cfg
        self.history: list[dict[str, float]] = []       # the last K steps' tracked values
        self.baseline_samples: dict[str, list[float]] = {}
        self.last_fired: dict[str, int] = {}
        self.checks: list[Callable[[dict[str, Any]], Alarm | None]] = [
            self._truncation, self._zero_variance, self._reward_flat, self._entropy, self._kl,
            self._ratio, self._mismatch, self._length, self._non_finite, self._task_zero_variance,
            self._tampering, self._reward_crash, self._judge_rise,
            self._distill_kl]

    def observe(self, step: int, record: dict[str, Any]) -> list[Alarm]:
        if not self.c.enabled:
            return []
        now = {k: float(v) for k, v in record.items() if isinstance(v, (int, float))
               and (k in _TRACKED or (k.startswith("reward/") and k.endswith("/frac_zero_std"))
                    or (k.startswith("rewards/") and k.endswith("/crash_rate")))}
        self.history = (self.history + [now])[-self.c.window:]
        for key in ("entropy", "completions/mean_length"):
            samples = self.baseline_samples.setdefault(key, [])
            if key in now and math.isfinite(now[key]) and len(samples) < self.c.window:
                samples.append(now[key])
        alarms = []
        for check in self.checks:
            alarm = check(now)
            if alarm is None:
                continue
            last = self.last_fired.get(alarm["name"])
            if last is not None and step - last < self.c.cooldown:
                continue
            self.last_fired[alarm["name"]] = step
            alarms.append(alarm)
        return alarms

    # ---- one check per alarm: current values in, an alarm or None out -------------------------

    def _full(self, key: str) -> list[float] | None:
        """The last K values of `key`, or None before K steps reported it."""
        vals = [h[key] for h in self.history if key in h]
        return vals if len(vals) >= self.c.window and len(self.history) >= self.c.window else None

    def _baseline(self, key: str) -> float | None:
        s = self.baseline_samples.get(key, [])
        return sum(s) / len(s) if len(s) >= self.c.window else None

    def _tampering(self, now: dict[str, float]) -> Alarm | None:
        r = now.get("behaviour/tamper_rate")
        if r is None or r <= self.c.tamper_max:
            return None
        return _alarm("tampering", f"{r:.0%} of episodes tried to change a test file",
                      "keep tests read-only with hidden tests (the default), add a tamper penalty, "
                      "and read the transcripts of flagged episodes")

    def _reward_crash(self, now: dict[str, float]) -> Alarm | None:
        rates = {k[len("rewards/"):-len("/crash_rate")]: v for k, v in now.items()
                 if k.startswith("rewards/") and k.endswith("/crash_rate") and v > 0}
        if not rates:
            return None
        listed = ", ".join(f"{term} ({rate:.0%})" for term, rate in sorted(rates.items()))
        return _alarm("reward_crash", f"reward terms failed and scored 0: {listed}",
                      "fix the function (its first traceback is the reward_crash event in metrics.jsonl); "
                      "run.strict_rewards=true stops the run at the first failure")

    def _judge_rise(self, now: dict[str, float]) -> Alarm | None:
        judged, rules = self._full("rewards/judged/mean"), self._full("rewards/rule_based/mean")
        if judged is None or rules is None:
            return None
        rise, rule_rise = judged[-1] - judged[0], rules[-1] - rules[0]
        if rise <= self.c.judge_rise or rule_rise >= self.c.flat_range:
            return None
        return _alarm("judge_rise", f"the model-judged terms' reward rose by {rise:.3f} over {len(judged)} "
                      f"steps while the rule-based terms' moved {rule_rise:+.3f}",
                      "read transcripts for flattery, length or text aimed at the judge; weight the "
                      "judge down or add a rule-based check of what it rewards")

    def _truncation(self, now: dict[str, float]) -> Alarm | None:
        r = now.get("completions/clipped_ratio")
        if r is None or r <= self.c.clipped_max:
            return None
        return _alarm("truncation", f"{r:.0%} of completions were cut at rollout.max_new_tokens",
                      "raise rollout.max_new_tokens, or add a length penalty if lengths are exploding")

    def _zero_variance(self, now: dict[str, float]) -> Alarm | None:
        vals = self._full("frac_reward_zero_std")
        if vals is None or min(vals) <= self.c.zero_std_max:
            return None
        return _alarm("zero_variance", f"frac_reward_zero_std above {self.c.zero_std_max:.0%} for "
                      f"{len(vals)} steps (now {vals[-1]:.0%}): most groups teach nothing",
                      "turn on curriculum.enabled / dynamic_sampling.enabled, add harder (or easier) "
                      "problems, or raise grpo.group_size")

    def _reward_flat(self, now: dict[str, float]) -> Alarm | None:
        vals = self._full("reward/mean")
        if vals is None or max(vals) - min(vals) >= self.c.flat_range:
            return None
        return _alarm("reward_flat", f"reward/mean stayed within {max(vals) - min(vals):.3f} of "
                      f"{vals[-1]:.3f} for {len(vals)} steps",
                      "check the verifier on a few transcripts; if rewards are all 0 or all 1, change "
                      "problem difficulty or use the curriculum")

    def _task_zero_variance(self, now: dict[str, float]) -> Alarm | None:
        """zero_variance for one task of a mixed run (a verifier in every one of the last K batches),
        which the batch-wide fraction can hide while the other tasks still learn."""
        keys = sorted(k for k in now if k.endswith("/frac_zero_std"))
        for key in keys if len(keys) > 1 else ():
            vals = self._full(key)
            if vals is not None and min(vals) > self.c.zero_std_max:
                task = key[len("reward/"):-len("/frac_zero_std")]
                return _alarm("task_zero_variance", f"task {task}: over {self.c.zero_std_max:.0%} of its "
                              f"groups had equal rewards for {len(vals)} steps: it teaches nothing",
                              f"lower {task}'s weight or difficulty, or turn on curriculum.enabled")
        return None

    def _entropy(self, now: dict[str, float]) -> Alarm | None:
        base, e = self._baseline("entropy"), now.get("entropy")
        if base is None or e is None or not math.isfinite(e) or base <= 0:
            return None
        if e < self.c.entropy_low * base:
            return _alarm("entropy_collapse", f"entropy {e:.3g} fell below {self.c.entropy_low:g}x its "
                          f"baseline {base:.3g}: the policy has stopped exploring",
                          "raise rollout.temperature, use grpo.eps_high > eps_low (clip-higher), "
                          "or lower grpo.lr")
        if e > self.c.entropy_high * base:
            return _alarm("entropy_blowup", f"entropy {e:.3g} rose above {self.c.entropy_high:g}x its "
                          f"baseline {base:.3g}: outputs are turning random",
                          "lower grpo.lr or grpo.entropy_coef, or add a KL term (grpo.beta > 0)")
        return None

    def _kl(self, now: dict[str, float]) -> Alarm | None:
        kl = now.get("kl")
        if kl is None or not math.isfinite(kl) or kl <= self.c.kl_max:
            return None
        return _alarm("kl_blowup", f"KL to the reference is {kl:.3g} (> {self.c.kl_max:g})",
                      "lower grpo.lr, raise grpo.beta, or resume from an earlier checkpoint")

    def _ratio(self, now: dict[str, float]) -> Alarm | None:
        hi, lo = now.get("ratio/max", 1.0), now.get("ratio/min", 1.0)
        if not (math.isfinite(hi) and math.isfinite(lo)):
            return None
        if hi <= self.c.ratio_max and lo >= 1 / self.c.ratio_max:
            return None
        return _alarm("ratio_extreme", f"PPO ratio π/π_old reached [{lo:.3g}, {hi:.3g}] (limit "
                      f"{1 / self.c.ratio_max:.3g}..{self.c.ratio_max:g}): the policy moved far "
                      "within one batch", "lower grpo.lr or grpo.mu, or use fewer minibatches")

    def _mismatch(self, now: dict[str, float]) -> Alarm | None:
        hi, lo = now.get("mismatch/ratio_max", 1.0), now.get("mismatch/ratio_min", 1.0)
        kl = now.get("mismatch/kl", 0.0)
        if not all(math.isfinite(x) for x in (hi, lo, kl)):
            return None
        if hi <= self.c.ratio_max and lo >= 1 / self.c.ratio_max and kl <= self.c.mismatch_kl_max:
            return None
        g, staleness = self.cfg.grpo, getattr(self.cfg.rollout, "max_staleness", 0)
        actions = []
        if staleness > 0:
            actions.append(f"lower rollout.max_staleness (now {staleness})")
        capped = max(now.get("mismatch/truncated_frac", 0.0), now.get("mismatch/masked_frac", 0.0))
        if g.is_correction == "none":
            actions.append("set grpo.is_correction=token to weight tokens by π_old/μ")
        elif capped > 0.05:
            actions.append(f"the correction caps {capped:.0%} of tokens at grpo.is_cap={g.is_cap:g}: "
                           "it cannot close a gap this wide")
        actions.append("check sampler/trainer parity (same temperature; same precision: "
                       "model.autocast_bf16 applies to both)")
        return _alarm("rollout_mismatch", f"behaviour log-probs disagree with the trainer: "
                      f"mismatch/kl {kl:.3g} (limit {self.c.mismatch_kl_max:g}), π_old/μ in "
                      f"[{lo:.3g}, {hi:.3g}]", "; ".join(actions))

    def _length(self, now: dict[str, float]) -> Alarm | None:
        base, n = self._baseline("completions/mean_length"), now.get("completions/mean_length")
        if base is None or n is None or n <= self.c.length_growth * base:
            return None
        return _alarm("length_explosion", f"mean completion length {n:.1f} is over "
                      f"{self.c.length_growth:g}x its baseline {base:.1f}",
                      "add a length penalty (shaping), check for repetition loops in transcripts, or "
                      "use a length-normalised loss_agg")

    def _distill_kl(self, now: dict[str, float]) -> Alarm | None:
        vals = self._full("distill/kl")
        if vals is None or not all(math.isfinite(v) for v in vals):
            return None
        rises = sum(b > a for a, b in zip(vals, vals[1:]))
        if rises < 0.8 * (len(vals) - 1) or vals[-1] - vals[0] <= self.c.distill_kl_rise:
            return None
        return _alarm("distill_kl_rising", f"distill/kl rose from {vals[0]:.3g} to {vals[-1]:.3g} over "
                      f"{len(vals)} steps: the student is moving away from the teacher",
                      "raise distill.coef (or set distill.only), lower grpo.lr, or check the teacher")

    def _non_finite(self, now: dict[str, float]) -> Alarm | None:
        bad = [k for k in ("loss", "grad_norm", "kl", "entropy") if k in now and not _finite(now[k])]
        if not bad:
            return None
        return _alarm("non_finite", f"{', '.join(bad)} was NaN/inf; the update was skipped",
                      "lower grpo.lr, check rewards for NaN, or train in float32")

    def state_dict(self) -> dict[str, Any]:
        return {"history": [dict(h) for h in self.history],
                "baseline_samples": {k: list(v) for k, v in self.baseline_samples.items()},
                "last_fired": dict(self.last_fired)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history = [dict(h) for h in state.get("history", [])]
        self.baseline_samples = {k: list(v) for k, v in state.get("baseline_samples", {}).items()}
        self.last_fired = dict(state.get("last_fired", {}))


def _alarm(name: str, message: str, action: str) -> Alarm:
    return {"name": name, "message": message, "action": action}
