"""The training doctor: watches each step's metrics and raises alarms with a cause and an action.

Placeholder seam: the full set of alarms is being built (issue 5). `observe` returns a list of
{"name", "message", "action"} dicts; its state is saved in checkpoints.
"""

from __future__ import annotations

from typing import Any


class Doctor:
    def __init__(self, cfg: Any):
        self.cfg = cfg

    def observe(self, step: int, record: dict[str, Any]) -> list[dict[str, str]]:
        return []

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None
