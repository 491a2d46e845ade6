"""Format verifier: well-formed `<think>…</think>` reasoning followed by exactly one answer block.

A response is well formed when (1) it has exactly one `<think>` (unless `think_prefilled`, where the
prompt already opened it and the response must hold none) and exactly one `</think>`, in that order,
with non-empty reasoning; (2) after `</think>` there is exactly one answer block — an
`<answer>…</answer>` pair (`answer="tag"`), one `\\boxed{}` (`answer="boxed"`) or either
(`answer="either"`) — with a non-empty body; (3) nothing but whitespace follows `</answer>`.
`require_think=False` drops (1). The reward is 1 when well formed, else 0; meant as a small term
(weight ~0.1) in a `CompositeVerifier`. `details["problems"]` names what was wrong.

Not checked: that the answer is right (that is the task verifier's job).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from rlvr.types import Problem, Score
from rlvr.verifiers.math.extract import boxed_contents

_ANSWERS = ("tag", "boxed", "either")


def format_problems(response: str, *, require_think: bool = True, think_prefilled: bool = False,
                    answer: str = "tag") -> list[str]:
    """What is wrong with the layout of `response` (empty list: well formed)."""
    problems: list[str] = []
    lower = response.lower()
    opens, closes = lower.count("<think>"), lower.count("</think>")
    tail = response
    if require_think:
        want_opens = 0 if think_prefilled else 1
        if opens != want_opens or closes != 1:
            problems.append(f"think_tags: {opens} open, {closes} close")
        else:
            start = lower.find("<think>") + len("<think>") if want_opens else 0
            end = lower.find("</think>")
            if end < start:
                problems.append("think_order")
            elif not response[start:end].strip():
                problems.append("empty_think")
            if want_opens and response[:lower.find("<think>")].strip():
                problems.append("text_before_think")
            tail = response[end + len("</think>"):]
    elif opens or closes:
        tail = response[lower.rfind("</think>") + len("</think>"):] if closes else response
    problems += _answer_problems(tail, answer)
    return problems


def _answer_problems(tail: str, answer: str) -> list[str]:
    tags = list(re.finditer(r"<answer>(.*?)</answer>", tail, re.DOTALL | re.IGNORECASE))
    stray = len(re.findall(r"</?answer>", tail, re.IGNORECASE)) != 2 * len(tags)
    boxes = boxed_contents(tail)
    if answer == "tag" or (answer == "either" and (tags or stray)):
        if stray or len(tags) != 1:
            return [f"answer_tags: {len(tags)} blocks" + (", unbalanced" if stray else "")]
        if not tags[0].group(1).strip():
            return ["empty_answer"]
        if tail[tags[0].end():].strip():
            return ["text_after_answer"]
        return []
    if len(boxes) != 1:
        return [f"boxed: {len(boxes)} boxes"]
    return [] if boxes[0].strip() else ["empty_answer"]


class FormatVerifier:
    name = "format"

    def __init__(self, *, require_think: bool = True, think_prefilled: bool = False,
                 answer: str = "tag"):
        if answer not in _ANSWERS:
            raise ValueError(f"answer must be one of {', '.join(_ANSWERS)}, got {answer!r}")
        self.options: dict[str, Any] = {"require_think": require_think, "think_prefilled": think_prefilled,
                        "answer": answer}

    def check_reference(self, problem: Problem) -> None:
        return None

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        memo: dict[str, Score] = {}
        out = []
        for response in responses:
            text = response if isinstance(response, str) else str(response)
            if text not in memo:
                problems_found = format_problems(text, **self.options)
                ok = not problems_found
                memo[text] = Score(float(ok), ok, () if ok else ("bad_format",),
                                   details={"problems": problems_found})
            out.append(memo[text])
        return out
