"""Tool-call formats: how a model turn names a tool, and how an observation is written back.

`PlainFormat` (models without a chat-template tool format, e.g. the tiny character model): a turn
that calls a tool is exactly `NAME:INPUT` followed by the end-of-turn token (EOS), where NAME is
lowercase letters/underscores; the environment's answer is written back as `[OBSERVATION]`. A turn
that is not of that shape (including an empty one) calls no tool and ends the episode ("stop").

`QwenFormat` (tokenizers whose chat template mentions `<tool_call>`, as Qwen2.5/Qwen3 do): a turn
calls a tool with `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Hermes style); the
observation is written back as Qwen's template writes a `tool` message, closing the assistant turn
and opening the next: `\n<|im_start|>user\n<tool_response>\nTEXT\n</tool_response><|im_end|>\n
<|im_start|>assistant\n` (the model's own `<|im_end|>` was sampled and stays in its tokens).
Only the first tool call of a turn is run. Not guaranteed: byte-identity with the template's
rendering of a whole conversation (whitespace between turns may differ); the tokens trained are
the tokens used, so this changes nothing for training.
"""

from __future__ import annotations

import json
import re
from typing import Protocol

from rlvr.agents.env import ToolCall

_PLAIN = re.compile(r"^([a-z_]+):(.*)$", re.DOTALL)
_QWEN = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


class CallFormat(Protocol):
    def parse(self, turn: str) -> ToolCall | None:
        """The tool call in a model turn (its text without the end-of-turn token), or None."""
        ...

    def render(self, observation: str) -> str:
        """The text appended after the model's turn, encoded once and never re-tokenised."""
        ...


class PlainFormat:
    name = "plain"

    def parse(self, turn: str) -> ToolCall | None:
        m = _PLAIN.match(turn)
        return ToolCall(m.group(1), {"input": m.group(2)}) if m else None

    def render(self, observation: str) -> str:
        return f"[{observation}]"


class QwenFormat:
    name = "qwen"

    def parse(self, turn: str) -> ToolCall | None:
        m = _QWEN.search(turn)
        if not m:
            return None
        try:
            call = json.loads(m.group(1))
        except json.JSONDecodeError:
            return ToolCall("invalid_json", {"input": m.group(1)})
        args = call.get("arguments", {}) if isinstance(call, dict) else {}
        name = call.get("name") if isinstance(call, dict) else None
        if not isinstance(name, str):
            return ToolCall("invalid_json", {"input": m.group(1)})
        return ToolCall(name, args if isinstance(args, dict) else {"input": args})

    def render(self, observation: str) -> str:
        return ("\n<|im_start|>user\n<tool_response>\n" + observation +
                "\n</tool_response><|im_end|>\n<|im_start|>assistant\n")


def choose_format(tokenizer) -> CallFormat:
    """Qwen's format when the tokenizer's chat template has `<tool_call>`, else the plain one."""
    template = getattr(tokenizer, "chat_template", None) or ""
    return QwenFormat() if "<tool_call>" in str(template) else PlainFormat()
