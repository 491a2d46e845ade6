"""Shared plumbing for the episode experiments (tamper, agentic_task): log lines, plots, verdicts.

Each writes `runs/experiments/<name>/verdict.md` (numbers + verdict), `result.json` and
`curves.png`. Nothing here downloads.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path("runs/experiments")
_T0 = time.perf_counter()


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def plot_panels(path: Path, panels: Sequence[tuple[str, dict[str, list[tuple[float, float]]]]]) -> None:
    """One panel per (y label, {legend: [(x, y), ...]}), stacked, written as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 2.6 * len(panels)))
    FigureCanvasAgg(fig)
    for i, (label, series) in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, i + 1)
        for name, pts in series.items():
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], label=name, marker=".")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def write_atomic(path: Path, text: str) -> None:
    """Whole or not at all: runs started together write the same data files (the same bytes) while
    the other's training may be reading them."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_verdict(name: str, result: dict[str, Any], lines: Sequence[str],
                  plot: Callable[[Path], None] | None = None) -> Path:
    """ROOT/name/verdict.md (human) and result.json (numbers); `plot` draws curves.png."""
    import resource

    out = ROOT / name
    out.mkdir(parents=True, exist_ok=True)
    # this process and the children it waited for (the rlvr train and rlvr eval subprocesses)
    cpu = sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                resource.getrusage(resource.RUSAGE_CHILDREN)))
    # A verdict rewritten from saved metrics keeps the cost of the run that produced them.
    result = {"process_cpu_seconds": round(cpu, 1),
              "process_wall_seconds": round(time.perf_counter() - _T0, 1), **result}
    lines = [*lines, "", f"Cost: {result['process_wall_seconds']:.0f} s wall, "
             f"{result['process_cpu_seconds']:.0f} s CPU (user + sys, all threads) for the whole command."]
    (out / "result.json").write_text(json.dumps(result, indent=2))
    (out / "verdict.md").write_text("\n".join(lines) + "\n")
    if plot is not None:
        try:
            plot(out / "curves.png")
        except Exception as exc:  # a missing plotting backend must not hide the verdict
            say(f"plot skipped: {exc!r}")
    for line in lines:
        print(line)
    return out / "verdict.md"
