"""Low-level LaTeX scanning shared by answer extraction (`extract`) and closing-sentence
reading (`prose`): boxes and their contents, math delimiters, connective and text commands.
Pure string functions in linear time; nothing here decides what counts as an answer."""

from __future__ import annotations

import re

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_DELIMS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"), ("**", "**"))
_CONNECTIVE = re.compile(
    r"\\(?:lor|vee|veebar)(?![A-Za-z])|(?<![A-Za-z\\])(?:or|either|otherwise|alternatively|maybe|"
    r"possibly|perhaps|ou|oder)(?![A-Za-z])|或|还是|也许", re.IGNORECASE)  # French, German, Chinese too
_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|mathrm|mbox|textnormal)\s*\{\s*([^{}]*)\}")


def _match_brace(text: str, open_at: int) -> int:
    """Index of the `}` closing the `{` at `open_at`, or -1. Escaped braces do not count."""
    depth = 0
    i = open_at
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _unbox(content: str) -> str:
    """`\\boxed{\\boxed{3}}` counts as one box holding 3 (up to 8 levels; deeper stays boxed)."""
    content = content.strip()
    for _ in range(8):
        for cmd in _BOX_COMMANDS:
            if content.startswith(cmd + "{") and _match_brace(content, len(cmd)) == len(content) - 1:
                content = content[len(cmd) + 1:-1].strip()
                break
        else:
            return content
    return content


def boxed_contents(text: str) -> list[str]:
    """Contents of every top-level box in `text`, left to right (linear time)."""
    return [content for _, _, content in box_spans(text)]


def box_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every top-level box in `text`, left to right (linear time)."""
    found: list[tuple[int, int, str]] = []
    next_at = {cmd: text.find(cmd) for cmd in _BOX_COMMANDS}
    i = 0
    while True:
        for cmd in _BOX_COMMANDS:
            if 0 <= next_at[cmd] < i:
                next_at[cmd] = text.find(cmd, i)
        hits = [(at, cmd) for cmd, at in next_at.items() if at >= 0]
        if not hits:
            return found
        at, cmd = min(hits)
        j = at + len(cmd)
        while j < len(text) and text[j] == " ":
            j += 1
        if j < len(text) and text[j] == "{":
            end = _match_brace(text, j)
            if end < 0:
                return found
            found.append((at, end + 1, _unbox(text[j + 1:end])))
            i = end + 1
        else:  # `\boxed 5`: the box holds the next token
            m = re.match(r"[^\s$]+", text[j:j + 200])
            if m and j > at + len(cmd):
                found.append((at, j + m.end(), m.group(0)))
            i = max(j + (m.end() if m else 0), at + 1)


def strip_delimiters(answer: str) -> str:
    """Remove math delimiters, markdown bold and trailing full stops around an answer."""
    s = answer.strip()
    while s:
        before = s
        s = re.sub(r"(?<![.\s])\s*\.+$", "", s) if not s.endswith("..") else s  # keep "..."
        for left, right in _DELIMS:
            if len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right):
                inner = s[len(left):len(s) - len(right)]
                if right not in inner.replace("\\$", ""):  # "$3$ and $4$" is two pieces of math
                    s = inner.strip()
                    break
        if s == before:
            return s
    return s
