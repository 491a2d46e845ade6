"""Reward terms that raise: reported, not only scored 0.

A reward function that raises (or overruns its `timeout_s`) gives its completions reward 0 and the
flag `crash`/`timeout` (see `rlvr.verifiers.reward_funcs`), which alone reads like a model that
never earns a reward. The verifier puts the error in `Score.details["term_errors"]`
({term: {"error", "traceback", "flag"}}); `RewardCrashes.observe` turns a step's scores into

- `rewards/<term>/crash_rate`: the share of the step's completions whose term failed (the key is
  present only in steps where some did; the doctor alarms on it),
- one `reward_crash` event per term, the first time that term fails in the run, with the error and
  its traceback (the run log writes it to `metrics.jsonl` and prints it once),

and with `strict` (`run.strict_rewards`) the caller stops the run at the first failure, as TRL
does. The set of terms already reported is saved in checkpoints, so a resumed run reports a term
once too. Code that the model wrote and that crashes in the sandbox is a verdict on the model, not a
reward-term failure: it carries no `term_errors` and is not counted here.
"""

from __future__ import annotations

from typing import Any, Sequence

from rlvr.types import Group


def term_failures(groups: Sequence[Group]) -> tuple[dict[str, int], dict[str, dict], int]:
    """(failed completions per term, the first error per term, completions in the step)."""
    counts: dict[str, int] = {}
    first: dict[str, dict] = {}
    total = 0
    for g in groups:
        for c in g.completions:
            total += 1
            errors = ((c.score.details or {}).get("term_errors") or {}) if c.score else {}
            for term, error in errors.items():
                counts[term] = counts.get(term, 0) + 1
                first.setdefault(term, dict(error))
    return counts, first, total


class RewardCrashes:
    def __init__(self) -> None:
        self.reported: set[str] = set()

    def observe(self, step: int, groups: Sequence[Group]) -> tuple[dict[str, float], list[dict[str, Any]]]:
        """(metrics for the step's line, events for terms failing for the first time)."""
        counts, first, total = term_failures(groups)
        metrics = {f"rewards/{term}/crash_rate": n / max(1, total) for term, n in sorted(counts.items())}
        events = []
        for term in sorted(set(first) - self.reported):
            self.reported.add(term)
            e, share = first[term], metrics[f"rewards/{term}/crash_rate"]
            events.append({"step": step, "event": "reward_crash", "term": term,
                           "flag": e.get("flag", "crash"), "error": e.get("error", ""),
                           "traceback": e.get("traceback", ""), "share": share})
        return metrics, events

    def state_dict(self) -> dict[str, Any]:
        return {"reward_crashes": sorted(self.reported)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.reported = set(state.get("reward_crashes", []))


def describe(event: dict[str, Any]) -> str:
    """The console text of a `reward_crash` event: what failed, where, and the traceback."""
    how = "timed out" if event.get("flag") == "timeout" else "raised"
    head = (f"[reward_crash] step {event['step']}: reward term {event['term']!r} {how} "
            f"({event['share']:.0%} of completions scored 0): {event['error']}")
    tail = event.get("traceback", "").rstrip()
    note = ("(reported once per term; the doctor alarms while it keeps failing; "
            "run.strict_rewards=true stops the run at the first failure)")
    return "\n".join([head, *([tail] if tail else []), note])
