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


def _ks(rows: Sequence[dict], metric: str) -> list[int]:
    return sorted(int(key.split("@")[1]) for key in rows[0] if key.startswith(metric + "@"))


def temperature_plot(sweep: Sequence[dict]) -> bytes:
    """pass@k (solid) and maj@k (dashed) against temperature, one colour per k. mean@k is left out:
    in expectation it equals pass@1, so it would only draw over that line; maj@1 is pass@1 too."""
    fig, ax = _axes("Temperature sweep", "temperature")
    xs = [row["temperature"] for row in sweep]
    ks = _ks(sweep, "pass")
    colours = {k: f"C{i}" for i, k in enumerate(ks)}
    for metric, style in (("pass", "-"), ("maj", "--")):
        for k in _ks(sweep, metric):
            if metric == "maj" and k == 1:
                continue
            ax.plot(xs, [row[f"{metric}@{k}"] for row in sweep], linestyle=style, marker="o",
                    color=colours.get(k), label=f"{metric}@{k}")
    ax.legend(fontsize=8, ncol=2, loc="best")
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
