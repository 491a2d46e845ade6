"""Stop strings on sampled rows, as vLLM applies them: a row ends after the token whose text
completes the first stop string (finish reason "stop"); its text ends before the stop string, or
after it with `include_stop_str`. Tokens and log-probs are kept as sampled up to that token.

Used by the in-process engines, which decode each row to its end (EOS or the token budget) and
cut it here: the same tokens as stopping in the loop, at the cost of the decode past the stop.
Not guaranteed: a match that only the detokenizer's clean-up of spaces would create or remove
(the text compared is the tokenizer's decode of the row's tokens, special tokens skipped).
"""

from __future__ import annotations

from typing import Sequence

Row = tuple[list[int], list[float], str]


def _first_stop(text: str, stops: Sequence[str]) -> tuple[int, str] | None:
    hits = [(text.find(s), s) for s in stops if s and s in text]
    return min(hits) if hits else None


def cut_row(row: Row, text: str, tokenizer, stops: Sequence[str], include: bool) -> tuple[Row, str]:
    """`row` (tokens, log-probs, reason) and its `text`, ended at the first stop string if any."""
    hit = _first_stop(text, stops)
    if hit is None:
        return row, text
    tokens, logps, _ = row

    def decoded(k: int) -> str:
        return tokenizer.decode(tokens[:k], skip_special_tokens=True)

    lo, hi = 1, len(tokens)   # the fewest tokens whose text holds a stop string (binary search)
    while lo < hi:
        mid = (lo + hi) // 2
        if _first_stop(decoded(mid), stops) is None:
            lo = mid + 1
        else:
            hi = mid
    at, stop = _first_stop(decoded(lo), stops) or hit
    prefix = decoded(lo)
    return (tokens[:lo], logps[:lo], "stop"), prefix[:at + len(stop)] if include else prefix[:at]


def cut_rows(rows: Sequence[Row], texts: Sequence[str], tokenizer, stops: Sequence[str],
             include: bool) -> tuple[list[Row], list[str]]:
    pairs = [cut_row(r, t, tokenizer, stops, include) for r, t in zip(rows, texts)]
    return [p[0] for p in pairs], [p[1] for p in pairs]
