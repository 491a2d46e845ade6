"""The `Environment` protocol: what an agent episode talks to between model turns.

An environment is built per episode (`make_env(problem)`), then `reset(problem)`, then one
`step(call)` per tool call the model makes, then `score()` once the episode ended (whatever the
reason), then `close()`. Tool calls arrive already parsed (`ToolCall`) by the episode's call
format (`rlvr.agents.calls`), so an environment never sees raw model text and works unchanged
with the plain and the chat-template formats. Not guaranteed by the protocol: isolation between
episodes; each implementation states its own (see `workspace.Workspace`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from rlvr.types import Problem, Score


@dataclass(frozen=True)
class ToolCall:
    """A parsed tool call: the tool's name and its arguments. The plain format carries the raw
    argument text as {"input": TEXT}; chat-template formats carry the JSON arguments."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """An environment's answer to one tool call; `done` ends the episode (finish reason "env")."""

    observation: str
    done: bool = False


class Environment(Protocol):
    def reset(self, problem: Problem) -> None:
        """Start an episode for `problem` (files, state)."""
        ...

    def step(self, call: ToolCall) -> Step:
        """Run one tool call; never raises on model input (unknown tool → an observation)."""
        ...

    def score(self) -> Score:
        """The episode's final verdict (flags such as `tamper_attempt`), called once at the end."""
        ...

    def close(self) -> None:
        """Release what the episode held; nothing of it may outlive this call."""
        ...


EnvFactory = Callable[[Problem], Environment]
