"""PNG charts for the run report, drawn with matplotlib's object API on the Agg canvas.

Every function takes plain Python data and returns PNG bytes. We never import pyplot, so no global
backend is switched and nothing opens a window; figures are garbage-collected with their canvas.
Guaranteed: any input (empty series, one point, NaN already removed by the caller) gives a valid
PNG. Not guaranteed: pixel-identical output across matplotlib versions.
"""

from __future__ import annotations

import io
from typing import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

Series = tuple[Sequence[float], Sequence[float]]      # (steps, values), both finite
Panel = tuple[str, dict[str, Series]]                 # (y-axis label, {legend label: series})
Band = tuple[Sequence[float], Sequence[float], Sequence[float]]   # (steps, low, high)

_WIDTH, _PANEL_HEIGHT, _DPI = 8.0, 2.6, 96


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI)
    return buf.getvalue()


def _draw_series(ax, label: str, series: Series) -> None:
    xs, ys = series
    # a few points are invisible as a bare line, so mark them
    marker = "o" if len(xs) <= 30 else None
    ax.plot(xs, ys, label=label, marker=marker, markersize=3, linewidth=1.2)


def line_panels(title: str, panels: Sequence[Panel],
                bands: dict[str, Band] | None = None) -> bytes:
    """Stacked panels sharing the step axis; `bands` ({label: band}) are shaded on panel 0."""
    fig = Figure(layout="constrained", figsize=(_WIDTH, _PANEL_HEIGHT * len(panels) + 0.4))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for i, (ax, (ylabel, series)) in enumerate(zip(axes, panels)):
        if i == 0 and bands:
            for label, (xs, lo, hi) in bands.items():
                ax.fill_between(xs, lo, hi, alpha=0.2, label=label)
        for label, s in series.items():
            _draw_series(ax, label, s)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if series or (i == 0 and bands):
            ax.legend(fontsize=8, loc="best")
    axes[-1].set_xlabel("step")
    axes[0].set_title(title)
    return _png(fig)


def stacked(title: str, steps: Sequence[float], stacks: Mapping[str, Sequence[float]],
            ylabel: str) -> bytes:
    """Stacked areas (e.g. seconds per stage) over steps."""
    fig = Figure(layout="constrained", figsize=(_WIDTH, _PANEL_HEIGHT + 0.6))
    ax = fig.add_subplot()
    if len(steps) == 1:
        bottom = 0.0
        for label, ys in stacks.items():
            ax.bar(steps, ys, bottom=bottom, label=label, width=0.6)
            bottom += ys[0]
    else:
        ax.stackplot(steps, *stacks.values(), labels=list(stacks), alpha=0.85)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    # outside the axes: the stack fills the plot area, so any inside spot would hide data
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig)


def pass_rate_heatmap(steps: Sequence[float], rates: Sequence[Sequence[float]],
                      max_step_bins: int = 40, rate_bins: int = 10) -> bytes:
    """Share of groups per pass-rate bin (y) in each step bin (x); columns sum to 1.

    Rates of exactly 1.0 fall in the top bin (numpy's last histogram bin is closed).
    """
    xs = np.array([s for s, group in zip(steps, rates) for _ in group], dtype=float)
    ys = np.array([r for group in rates for r in group], dtype=float)
    lo, hi = float(xs.min()), float(xs.max())
    n_step_bins = max(1, min(max_step_bins, len(set(steps))))
    x_edges = np.linspace(lo, hi + 1.0, n_step_bins + 1)
    y_edges = np.linspace(0.0, 1.0, rate_bins + 1)
    counts, _, _ = np.histogram2d(xs, ys, bins=(x_edges, y_edges))
    totals = counts.sum(axis=1, keepdims=True)
    share = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
    fig = Figure(layout="constrained", figsize=(_WIDTH, _PANEL_HEIGHT + 0.8))
    ax = fig.add_subplot()
    mesh = ax.pcolormesh(x_edges, y_edges, share.T, cmap="viridis", vmin=0.0, vmax=1.0)
    fig.colorbar(mesh, ax=ax, label="share of groups")
    ax.set_xlabel("step")
    ax.set_ylabel("group pass rate")
    ax.set_title("Per-group pass rates over training")
    return _png(fig)


def alarm_timeline(events: Sequence[tuple[float, str, str]],
                   background: Series | None = None) -> bytes:
    """One row per alarm name, one marker per alarm at its step; marker shape by action.

    events: (step, name, action). background: an optional series (e.g. reward) drawn faintly.
    """
    names = list(dict.fromkeys(name for _, name, _ in events))
    actions = list(dict.fromkeys(action for _, _, action in events))
    markers = "ovs^Dxp*"
    fig = Figure(layout="constrained", figsize=(_WIDTH, 1.2 + 0.35 * len(names)))
    ax = fig.add_subplot()
    for j, action in enumerate(actions):
        pts = [(s, names.index(n)) for s, n, a in events if a == action]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=markers[j % len(markers)],
                   label=action or "(no action)", zorder=3, color=f"C{(j + 3) % 10}")
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(-0.7, len(names) - 0.3)
    if background is not None and len(background[0]):
        twin = ax.twinx()
        twin.plot(*background, color="grey", alpha=0.35, linewidth=1)
        twin.set_ylabel("reward/mean", color="grey")
    ax.set_xlabel("step")
    ax.set_title("Alarms")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=8, loc="upper left", title="action", title_fontsize=8)
    return _png(fig)


def small_multiples(title: str, series: dict[str, Series], columns: int = 3) -> bytes:
    """A grid of one small line chart per metric."""
    rows = max(1, -(-len(series) // columns))
    fig = Figure(layout="constrained", figsize=(_WIDTH, 2.0 * rows + 0.5))
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax, (label, s) in zip(axes, series.items()):
        _draw_series(ax, label, s)
        ax.set_title(label, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes[len(series):]:
        ax.set_visible(False)
    fig.suptitle(title)
    return _png(fig)
