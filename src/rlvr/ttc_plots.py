"""PNG charts for `rlvr eval`: accuracy vs thinking budget, vs temperature, vs number of votes.

Every function takes the plain rows that `eval.json` stores and returns PNG bytes, drawn with
matplotlib's object API on the Agg canvas (no pyplot, no global backend switch, no window).
Guaranteed: any non-empty input gives a valid PNG. Not guaranteed: pixel-identical output across
matplotlib versions.
"""

from __future__ import annotations

import io
from typing import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

_SIZE, _DPI = (6.4, 4.0), 96


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight")
    return buf.getvalue()


def _axes(title: str, xlabel: str, ylabel: str = "accuracy"):
    fig = Figure(figsize=_SIZE)
    ax = fig.subplots()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, 1.02)  # accuracies: a fixed scale keeps plots of different runs comparable
    ax.grid(alpha=0.3)
    return fig, ax


def budget_plot(curve: Sequence[dict]) -> bytes:
    """Accuracy vs thinking-token budget, with the mean tokens actually spent on a second axis."""
    fig, ax = _axes("Budget forcing: accuracy vs thinking budget", "thinking-token budget")
    xs = [row["budget"] for row in curve]
    ax.plot(xs, [row["accuracy"] for row in curve], marker="o", label="accuracy")
    spent = ax.twinx()
    spent.plot(xs, [row["mean_tokens"] for row in curve], color="gray", linestyle="--",
               marker=".", label="mean tokens generated")
    spent.set_ylabel("mean tokens generated")
    lines = ax.get_lines() + spent.get_lines()
    ax.legend(lines, [line.get_label() for line in lines], loc="upper left", fontsize=8)
    return _png(fig)


def _metric_keys(rows: Sequence[dict]) -> list[str]:
    keys = [k for k in rows[0] if "@" in k]
    return sorted(keys, key=lambda k: (k.split("@")[0], int(k.split("@")[1])))


def temperature_plot(sweep: Sequence[dict]) -> bytes:
    """pass@k, maj@k and mean@k against sampling temperature."""
    fig, ax = _axes("Temperature sweep", "temperature")
    xs = [row["temperature"] for row in sweep]
    for key in _metric_keys(sweep):
        style = {"pass": "-", "maj": "--", "mean": ":"}.get(key.split("@")[0], "-")
        ax.plot(xs, [row[key] for row in sweep], linestyle=style, marker="o", label=key)
    ax.legend(fontsize=8, ncol=3, loc="best")
    return _png(fig)


def vote_plot(curve: Sequence[dict]) -> bytes:
    """maj@k (majority vote) and pass@k (any correct) against the number of samples k."""
    fig, ax = _axes("Accuracy vs number of samples", "samples k")
    xs = [row["k"] for row in curve]
    ax.plot(xs, [row["maj"] for row in curve], marker="o", label="maj@k (vote)")
    ax.plot(xs, [row["pass"] for row in curve], marker="s", linestyle="--", label="pass@k (oracle)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.legend(fontsize=8, loc="best")
    return _png(fig)
